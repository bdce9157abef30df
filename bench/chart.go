package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strings"
	"unicode"
)

// Chart geometry and colours.
const (
	chartW, chartH = 960, 540
	plotLeft       = 90
	plotRight      = chartW - 20
	plotTop        = 80
	plotBottom     = chartH - 90
)

var (
	colBackground = color.RGBA{255, 255, 255, 255}
	colInk        = color.RGBA{40, 40, 40, 255}
	colGrid       = color.RGBA{225, 225, 225, 255}
	colBase       = color.RGBA{76, 114, 176, 255}
	colJetfn      = color.RGBA{221, 132, 82, 255}
)

// WriteChart draws the no-op rows' throughput as grouped bars, baseline and
// jetfn side by side per size and concurrency, with jetfn/raw under each
// group. It refuses an A/A run's report, whose bars would all be raw.
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
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	draw.Draw(img, img.Bounds(), image.NewUniform(colBackground), image.Point{}, draw.Src)
	top := axisTop(rows)
	drawAxis(img, top)
	drawBars(img, rows, top)
	drawText(img, 8, plotBottom+44, 1, colInk, "jetfn/raw")
	drawText(img, plotLeft, 20, 3, colInk, fmt.Sprintf("throughput, msgs/s (median of %d)", r.Repetitions))
	drawLegend(img)
	return png.Encode(w, img)
}

// axisTop is the y-axis maximum: the largest rate rounded up to a step.
func axisTop(rows []Row) float64 {
	peak := 0.0
	for _, row := range rows {
		peak = max(peak, row.Base.Rate, row.Jetfn.Rate)
	}
	step := math.Pow(10, math.Floor(math.Log10(max(peak, 1))))
	return math.Ceil(peak/step) * step
}

func yOf(v, top float64) int {
	return plotBottom - int(v/top*float64(plotBottom-plotTop))
}

func drawAxis(img *image.RGBA, top float64) {
	const ticks = 5
	for i := 0; i <= ticks; i++ {
		v := top * float64(i) / ticks
		y := yOf(v, top)
		fillRect(img, plotLeft, y, plotRight, y+1, colGrid)
		label := shortNumber(v)
		drawText(img, plotLeft-10-textWidth(label, 2), y-7, 2, colInk, label)
	}
	fillRect(img, plotLeft, plotTop, plotLeft+1, plotBottom, colInk)
	fillRect(img, plotLeft, plotBottom, plotRight, plotBottom+1, colInk)
}

func drawBars(img *image.RGBA, rows []Row, top float64) {
	group := (plotRight - plotLeft) / len(rows)
	bar := group * 3 / 10
	for i, row := range rows {
		x := plotLeft + i*group + (group-2*bar)/2
		drawBar(img, x, bar, row.Base.Rate, top, colBase)
		drawBar(img, x+bar, bar, row.Jetfn.Rate, top, colJetfn)
		center := plotLeft + i*group + group/2
		label := fmt.Sprintf("%s c=%d", sizeLabel(row.Size), row.Concurrency)
		drawText(img, center-textWidth(label, 2)/2, plotBottom+14, 2, colInk, label)
		ratio := fmt.Sprintf("%.2fx", row.RateRatio())
		drawText(img, center-textWidth(ratio, 2)/2, plotBottom+40, 2, colInk, ratio)
	}
}

func drawBar(img *image.RGBA, x, width int, v, top float64, c color.Color) {
	y := yOf(v, top)
	fillRect(img, x+2, y, x+width-2, plotBottom, c)
	label := shortNumber(v)
	drawText(img, x+width/2-textWidth(label, 1)/2, y-10, 1, colInk, label)
}

func drawLegend(img *image.RGBA) {
	x := plotRight - 260
	fillRect(img, x, 56, x+14, 70, colBase)
	drawText(img, x+20, 56, 2, colInk, "raw")
	fillRect(img, x+90, 56, x+104, 70, colJetfn)
	drawText(img, x+110, 56, 2, colInk, "jetfn")
}

func fillRect(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
}

// drawText draws s with its top-left corner at (x, y), each font pixel
// scale×scale screen pixels.
func drawText(img *image.RGBA, x, y, scale int, c color.Color, s string) {
	for _, r := range strings.ToLower(s) {
		g := glyphs[unicode.ToLower(r)]
		for row, line := range g {
			for col, px := range line {
				if px == '#' {
					fillRect(img, x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale, c)
				}
			}
		}
		x += 6 * scale
	}
}

func textWidth(s string, scale int) int { return len([]rune(s)) * 6 * scale }

// shortNumber writes 12345 as 12.3k.
func shortNumber(v float64) string {
	switch {
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
