package bench

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ScaleResults are the scale curves of one run (issue 34); a curve not
// measured is empty, and its panel is left out of the chart.
type ScaleResults struct {
	Idle      []IdleRow
	Held      []HeldRow
	Backlog   []BacklogRow
	Instances []InstancesRow
	Ceiling   *CeilingRow
}

// colTarget draws a target or a ceiling: a dashed grey line.
var colTarget = color.RGBA{120, 120, 120, 255}

// A third and fourth series' colours, after colBase and colJetfn.
var colThird, colFourth = color.RGBA{85, 168, 104, 255}, color.RGBA{129, 114, 179, 255}

// WriteScaleChart draws each measured curve as a panel of one PNG, three
// panels to a row: the idle functions' requests, CPU and memory (raw
// nats.go beside jetfn, the target dashed), the memory of messages
// held at once, the backlog's rate by tenth, and the instances' aggregate
// rate under the server's ceiling.
func WriteScaleChart(w io.Writer, r ScaleResults) error {
	panels, err := scalePanels(r)
	if err != nil {
		return err
	}
	if len(panels) == 0 {
		return errors.New("scale chart: no curve measured")
	}
	const cols = 3
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
		for j := range cols {
			if k := i*cols + j; k < len(panels) {
				grid[i][j] = panels[k]
			}
		}
	}
	img := vgimg.New(vg.Length(cols)*4.2*vg.Inch, vg.Length(rows)*3.4*vg.Inch)
	canvases := plot.Align(grid, draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 6,
		PadY: vg.Millimeter * 6, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3,
		PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}, draw.New(img))
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// scalePanels builds one plot per measured curve, in the order of the
// issue's list.
func scalePanels(r ScaleResults) ([]*plot.Plot, error) {
	var panels []*plot.Plot
	add := func(p *plot.Plot, err error) error {
		if err == nil {
			panels = append(panels, p)
		}
		return err
	}
	if len(r.Idle) > 0 {
		for _, curve := range idleCurves {
			if err := add(idlePanel(r.Idle, curve)); err != nil {
				return nil, err
			}
		}
	}
	if len(r.Held) > 0 {
		if err := add(heldPanel(r.Held)); err != nil {
			return nil, err
		}
	}
	if len(r.Backlog) > 0 {
		if err := add(backlogPanel(r.Backlog)); err != nil {
			return nil, err
		}
	}
	if len(r.Instances) > 0 {
		if err := add(instancesPanel(r.Instances, r.Ceiling)); err != nil {
			return nil, err
		}
	}
	return panels, nil
}

// idleCurve is one figure of the idle rows, with the target at
// 500 functions.
type idleCurve struct {
	title, unit string
	target      float64
	value       func(IdleRow) float64
}

var idleCurves = []idleCurve{
	{"Idle: server requests per function per 10 s", "requests", 1, IdleRow.PerFunctionPer10s},
	{"Idle: CPU", "% of a core", 2, IdleRow.CPUPercent},
	{"Idle: peak resident memory", "MiB", 200, func(r IdleRow) float64 { return float64(r.PeakRSSKB) / 1024 }},
}

func idlePanel(rows []IdleRow, c idleCurve) (*plot.Plot, error) {
	p := newPanel(c.title, "functions per process", c.unit)
	var raw, jetfn plotter.XYs
	var counts []float64
	for _, row := range rows {
		pt := plotter.XY{X: float64(row.Functions), Y: c.value(row)}
		if row.Variant == variantIdleRaw {
			raw = append(raw, pt)
			counts = append(counts, pt.X)
		} else {
			jetfn = append(jetfn, pt)
		}
	}
	logX(p, counts)
	if err := addCurve(p, "nats.go Consume", raw, colBase); err != nil {
		return nil, err
	}
	if err := addCurve(p, "jetfn", jetfn, colJetfn); err != nil {
		return nil, err
	}
	addLevel(p, "target at 500", c.target)
	return p, nil
}

func heldPanel(rows []HeldRow) (*plot.Plot, error) {
	p := newPanel("Held at once by slow handlers: memory", "messages held", "MiB")
	var rss, heap, stack plotter.XYs
	var counts []float64
	for _, row := range rows {
		x := float64(row.Held)
		counts = append(counts, x)
		rss = append(rss, plotter.XY{X: x, Y: float64(row.RSSKB) / 1024})
		heap = append(heap, plotter.XY{X: x, Y: float64(row.HeapKB) / 1024})
		stack = append(stack, plotter.XY{X: x, Y: float64(row.StackKB) / 1024})
	}
	logX(p, counts)
	for _, s := range []struct {
		name string
		xys  plotter.XYs
		c    color.Color
	}{{"resident", rss, colJetfn}, {"live heap", heap, colBase}, {"goroutine stacks", stack, colThird}} {
		if err := addCurve(p, s.name, s.xys, s.c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func backlogPanel(rows []BacklogRow) (*plot.Plot, error) {
	p := newPanel("Backlog drained: rate by tenth", "tenth of the backlog", "msgs/s")
	p.X.Tick.Marker = countTicks([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	colours := []color.Color{colJetfn, colBase, colThird, colFourth}
	for i, row := range rows {
		var xys plotter.XYs
		for t := range row.Tenths {
			xys = append(xys, plotter.XY{X: float64(t + 1), Y: row.Rate(t)})
		}
		name := shortNumber(float64(row.Messages)) + " stored"
		if err := addCurve(p, name, xys, colours[i%len(colours)]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func instancesPanel(rows []InstancesRow, ceiling *CeilingRow) (*plot.Plot, error) {
	p := newPanel("Instances sharing one consumer", "instances (processes)", "msgs/s together")
	var xys plotter.XYs
	var counts []float64
	for _, row := range rows {
		counts = append(counts, float64(row.Instances))
		xys = append(xys, plotter.XY{X: float64(row.Instances), Y: row.Rate()})
	}
	logX(p, counts)
	if err := addCurve(p, "jetfn", xys, colJetfn); err != nil {
		return nil, err
	}
	if ceiling != nil {
		addLevel(p, "nats bench js consume", ceiling.CLIExplicit)
	}
	return p, nil
}

// newPanel is an empty panel with its titles, its y axis from zero and
// short numbers on it.
func newPanel(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Y.Min = 0
	p.Y.Tick.Marker = shortTicks
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	return p
}

// logX puts the x axis on a log scale, ticked at the counts measured.
func logX(p *plot.Plot, counts []float64) {
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = countTicks(counts)
}

func countTicks(counts []float64) plot.ConstantTicks {
	ticks := make(plot.ConstantTicks, len(counts))
	for i, c := range counts {
		ticks[i] = plot.Tick{Value: c, Label: strconv.FormatFloat(c, 'f', -1, 64)}
	}
	return ticks
}

// addCurve draws one series as a line with its points, and leaves room
// above it for the legend.
func addCurve(p *plot.Plot, name string, xys plotter.XYs, c color.Color) error {
	if len(xys) == 0 {
		return nil
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	line.Color, points.Color = c, c
	line.Width = vg.Points(1.5)
	p.Add(line, points)
	p.Legend.Add(name, line, points)
	for _, pt := range xys {
		p.Y.Max = max(p.Y.Max, 1.35*pt.Y)
	}
	return nil
}

// addLevel draws a horizontal dashed line at y across the panel: a target
// or a ceiling.
func addLevel(p *plot.Plot, name string, y float64) {
	level := plotter.NewFunction(func(float64) float64 { return y })
	level.Color, level.Dashes = colTarget, []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(level)
	p.Legend.Add(name, level)
	p.Y.Max = max(p.Y.Max, 1.35*y)
}
