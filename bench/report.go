package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a whole run: one row per case, and what it ran on.
type Report struct {
	Rows        []Row
	Repetitions int
	Machine     Machine
	Wall        time.Duration
}

// Row is one case: the baseline's and jetfn's medians side by side.
type Row struct {
	Workload    string
	Concurrency int
	Size        int    // payload bytes; 0 for sessions
	Baseline    string // "raw" or "bare"
	Base, Jetfn Stats
}

func newRow(c caseKey, samples [2][]sample) Row {
	return Row{Workload: c.workload, Concurrency: c.concurrency, Size: c.size,
		Baseline: c.variants()[0], Base: medianStats(samples[0]), Jetfn: medianStats(samples[1])}
}

// Case names the row: "noop 128B c=16", "e2e c=8".
func (r Row) Case() string {
	if r.Workload == WorkloadSession {
		return fmt.Sprintf("e2e c=%d", r.Concurrency)
	}
	return fmt.Sprintf("noop %s c=%d", sizeLabel(r.Size), r.Concurrency)
}

// RateRatio is jetfn's throughput over the baseline's.
func (r Row) RateRatio() float64 { return r.Jetfn.Rate / r.Base.Rate }

// AddedP99Millis is how much jetfn adds to the p99 latency.
func (r Row) AddedP99Millis() float64 { return r.Jetfn.P99Millis - r.Base.P99Millis }

func (r Row) cells() []string {
	b, j := r.Base, r.Jetfn
	return []string{
		r.Case(), r.Baseline,
		f0(b.Rate), f0(j.Rate), ratio(j.Rate, b.Rate),
		f2(b.P50Millis), f2(j.P50Millis), ratio(j.P50Millis, b.P50Millis),
		f2(b.P99Millis), f2(j.P99Millis), ratio(j.P99Millis, b.P99Millis), fmt.Sprintf("%+.2f", r.AddedP99Millis()),
		f1(b.CPUMicros), f1(j.CPUMicros), ratio(j.CPUMicros, b.CPUMicros),
		f1(b.AllocsPerMsg), f1(j.AllocsPerMsg), ratio(j.AllocsPerMsg, b.AllocsPerMsg),
		f0(b.BytesPerMsg), f0(j.BytesPerMsg),
		f1(b.PeakRSSMB), f1(j.PeakRSSMB),
	}
}

var header = []string{
	"case", "baseline",
	"base msgs/s", "jetfn msgs/s", "×",
	"base p50 ms", "jetfn p50 ms", "×",
	"base p99 ms", "jetfn p99 ms", "×", "added p99 ms",
	"base CPU µs/msg", "jetfn CPU µs/msg", "×",
	"base allocs/msg", "jetfn allocs/msg", "×",
	"base B/msg", "jetfn B/msg",
	"base RSS MB", "jetfn RSS MB",
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func ratio(jetfn, base float64) string {
	if base == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", jetfn/base)
}

// WriteTable prints the rows as an aligned text table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, row := range r.Rows {
		fmt.Fprintln(tw, strings.Join(row.cells(), "\t")+"\t")
	}
	return tw.Flush()
}

// WriteMarkdown prints the rows as a Markdown table.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintln(w, "| "+strings.Join(header, " | ")+" |")
	fmt.Fprintln(w, "|"+strings.Repeat("---|", 2)+strings.Repeat("--:|", len(header)-2))
	for _, row := range r.Rows {
		fmt.Fprintln(w, "| "+strings.Join(row.cells(), " | ")+" |")
	}
}

// Target is one of issue 6's goals and whether this run met it.
type Target struct {
	Goal   string
	Met    bool
	Detail string // the worst case
}

// Targets checks the run against the goals. They are goals to report, not
// assertions: a shared machine moves the numbers.
func (r *Report) Targets() []Target {
	noop := r.rows(WorkloadNoop)
	e2e := r.rows(WorkloadSession)
	allocRatio := func(r Row) float64 { return r.Jetfn.AllocsPerMsg / r.Base.AllocsPerMsg }
	var out []Target
	if len(noop) > 0 {
		out = append(out,
			check("no-op throughput ≥ 0.9× raw", noop, Row.RateRatio, atLeast(0.9), "%.2f×"),
			check("p99 added latency < 0.5 ms", noop, Row.AddedP99Millis, below(0.5), "%+.2f ms"),
			check("allocations per message ≤ 2× raw", noop, allocRatio, atMost(2), "%.2f×"))
	}
	if len(e2e) > 0 {
		out = append(out, check("e2e throughput ≥ 0.9× bare", e2e, Row.RateRatio, atLeast(0.9), "%.2f×"))
	}
	return out
}

// goal says whether a value meets a target and which of two is worse.
type goal struct {
	meets func(v float64) bool
	worse func(a, b float64) bool
}

func atLeast(limit float64) goal {
	return goal{meets: func(v float64) bool { return v >= limit }, worse: func(a, b float64) bool { return a < b }}
}

func atMost(limit float64) goal {
	return goal{meets: func(v float64) bool { return v <= limit }, worse: func(a, b float64) bool { return a > b }}
}

func below(limit float64) goal {
	return goal{meets: func(v float64) bool { return v < limit }, worse: func(a, b float64) bool { return a > b }}
}

// check judges a goal by its worst row.
func check(name string, rows []Row, value func(Row) float64, g goal, format string) Target {
	w := rows[0]
	for _, row := range rows[1:] {
		if g.worse(value(row), value(w)) {
			w = row
		}
	}
	v := value(w)
	return Target{Goal: name, Met: g.meets(v), Detail: fmt.Sprintf("worst: "+format+" at %s", v, w.Case())}
}

func (r *Report) rows(workload string) []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Workload == workload {
			out = append(out, row)
		}
	}
	return out
}

// WriteTargets prints one line per target.
func (r *Report) WriteTargets(w io.Writer) {
	for _, t := range r.Targets() {
		mark := "met   "
		if !t.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "%s  %s (%s)\n", mark, t.Goal, t.Detail)
	}
}
