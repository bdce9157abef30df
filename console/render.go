package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jetfn/jetfn/internal/textfit"
)

//go:embed assets
var assets embed.FS

// pageNames are the templates under assets/, each defining "main" inside
// layout.html.
var pageNames = []string{"functions", "runs", "run", "deadletters", "deadletter", "deploys", "diff", "job",
	"confirm", "login", "error"}

// pages are the parsed templates, one set per page.
type pages struct{ byName map[string]*template.Template }

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parsing page %s: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// page is what every template gets.
type page struct {
	Name     string
	Title    string
	Live     string // the URL the page refreshes its main part from; "" for none
	ReadOnly bool
	User     string
	CSRF     string
	Path     string
	Now      time.Time
	TraceURL string
	Data     any
}

// render executes the page whole, or only its main part (for a live
// refresh).
func (p *pages) render(name string, data page, mainOnly bool) ([]byte, error) {
	t, ok := p.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: page %s", ErrNotFound, name)
	}
	var buf bytes.Buffer
	root := "layout"
	if mainOnly {
		root = "main"
	}
	if err := t.ExecuteTemplate(&buf, root, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// staticFS is the stylesheet, script and icon.
func staticFS() fs.FS {
	sub, _ := fs.Sub(assets, "assets/static")
	return sub
}

var funcs = template.FuncMap{
	"ms":        formatMillis,
	"rate":      formatRate,
	"count":     formatCount,
	"ago":       formatAgo,
	"uptime":    formatUptime,
	"short":     shortID,
	"head":      func(id string) string { return textfit.Truncate(id, 9) },
	"trunc":     textfit.Truncate,
	"spark":     sparkPoints,
	"sparkMax":  sparkMax,
	"payload":   payloadText,
	"traceLink": traceLink,
	"query":     func(kv ...string) string { return queryOf(kv...) },
	"add":       func(a, b int) int { return a + b },
	"pct": func(a, b int) int {
		if b <= 0 {
			return 0
		}
		return min(100, a*100/b)
	},
	"isoTime": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"clock":   func(t time.Time) string { return t.Local().Format("15:04:05") },
	"string":  func(b byte) string { return string(rune(b)) },
}

func formatMillis(v float64) string {
	switch {
	case v <= 0:
		return "–"
	case v < 1:
		return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	case v < 10_000:
		return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(v/1000, 'f', 1, 64) + " s"
}

func formatRate(v float64) string {
	switch {
	case v <= 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v < 10_000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v/1000, 'f', 1, 64) + "k"
}

// formatCount groups digits by thousands: 12,345.
func formatCount(v any) string {
	s := fmt.Sprint(v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func formatAgo(t, now time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return formatUptime(now.Sub(t)) + " ago"
}

func formatUptime(d time.Duration) string {
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// shortID is the end of an instance ID: micro IDs of one process share
// their start and differ at the end.
func shortID(id string) string {
	if len(id) <= 7 {
		return id
	}
	return "…" + id[len(id)-6:]
}

// sparkWidth and sparkHeight are the chart's viewBox.
const (
	sparkWidth  = 120
	sparkHeight = 28
)

// sparkPoints is an SVG polyline's points for the history, scaled to the
// chart, newest at the right edge.
func sparkPoints(h []float64) string {
	if len(h) == 0 {
		return ""
	}
	top := sparkMax(h)
	step := float64(sparkWidth) / float64(max(historyLen-1, 1))
	x0 := float64(sparkWidth) - step*float64(len(h)-1)
	var b strings.Builder
	for i, v := range h {
		y := float64(sparkHeight-2) - (v/top)*float64(sparkHeight-4)
		fmt.Fprintf(&b, "%.1f,%.1f ", x0+step*float64(i), y)
	}
	return strings.TrimSpace(b.String())
}

// sparkMax is the chart's top: the history's peak, at least 1/s.
func sparkMax(h []float64) float64 {
	top := 1.0
	for _, v := range h {
		top = math.Max(top, v)
	}
	return top
}

// payloadText shows a payload: indented when it is JSON, as is when it is
// text, and as a note when it is binary.
func payloadText(b []byte) string {
	if len(b) == 0 {
		return "(empty)"
	}
	var out bytes.Buffer
	if json.Valid(b) && json.Indent(&out, b, "", "  ") == nil {
		return out.String()
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return fmt.Sprintf("(%d bytes, not UTF-8 text)", len(b))
}

// traceLink fills a trace viewer's URL template, or is "" without one.
func traceLink(template, traceID string) string {
	if template == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(template, "{trace_id}", url.PathEscape(traceID))
}

func queryOf(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}
