package bench

import (
	"fmt"
	"image/color"
	"io"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The bars' colours: raw nats.go and jetfn.
var (
	colBase  = color.RGBA{76, 114, 176, 255}
	colJetfn = color.RGBA{221, 132, 82, 255}
)

// WriteChart draws the no-op rows' throughput as grouped bars, baseline and
// jetfn side by side per size and concurrency, with jetfn/raw in each
// group's label, as a PNG drawn by gonum/plot. It refuses an A/A run's
// report, whose bars would all be raw.
func (r *Report) WriteChart(w io.Writer) error {
	if r.Config.AgainstItself {
		return errAgainstItself
	}
	var rows []Row
	for _, row := range r.Rows {
		if row.Workload == WorkloadNoop {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("chart: no no-op rows")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput, msgs/s (median of %d)", r.Repetitions)
	p.Y.Label.Text = "msgs/s"
	p.Y.Min = 0
	p.Y.Tick.Marker = shortTicks
	p.Add(plotter.NewGrid())
	base, jetfn := make(plotter.Values, len(rows)), make(plotter.Values, len(rows))
	names := make([]string, len(rows))
	for i, row := range rows {
		base[i], jetfn[i] = row.Base.Rate, row.Jetfn.Rate
		p.Y.Max = max(p.Y.Max, 1.15*row.Base.Rate, 1.15*row.Jetfn.Rate) // room for the legend
		names[i] = fmt.Sprintf("%s c=%d\njetfn/raw %.2fx", sizeLabel(row.Size), row.Concurrency, row.RateRatio())
	}
	width := vg.Points(40)
	if err := addBars(p, base, "raw", colBase, -width/2, width); err != nil {
		return err
	}
	if err := addBars(p, jetfn, "jetfn", colJetfn, width/2, width); err != nil {
		return err
	}
	p.Legend.Top = true
	p.NominalX(names...)
	wt, err := p.WriterTo(9.6*vg.Inch, 5.4*vg.Inch, "png")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// addBars adds one series of bars, offset from each group's centre.
func addBars(p *plot.Plot, v plotter.Values, name string, c color.Color, offset, width vg.Length) error {
	bars, err := plotter.NewBarChart(v, width)
	if err != nil {
		return err
	}
	bars.Color, bars.LineStyle.Width, bars.Offset = c, 0, offset
	p.Add(bars)
	p.Legend.Add(name, bars)
	return nil
}

// shortTicks are the default ticks labelled by shortNumber.
var shortTicks = plot.TickerFunc(func(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(min, max) {
		if t.Label != "" {
			t.Label = shortNumber(t.Value)
		}
		ticks = append(ticks, t)
	}
	return ticks
})

// shortNumber writes 12345 as 12.3k and 1000000 as 1M.
func shortNumber(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 10000:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

func sizeLabel(bytes int) string {
	if bytes >= 1024 && bytes%1024 == 0 {
		return fmt.Sprintf("%dKB", bytes/1024)
	}
	return fmt.Sprintf("%dB", bytes)
}
