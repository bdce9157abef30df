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
	// Config is what the run measured; the rate and slow rows name their
	// settings from it.
	Config Config
	// TraceExports is how many OTLP requests the trace case's sink got.
	TraceExports int64
}

// Row is one case: the baseline's and jetfn's medians side by side, and
// the medians of the pairs' ratios, which the × columns and the goals use.
type Row struct {
	Workload    string
	Concurrency int
	Size        int    // payload bytes; 0 for sessions and slow
	Prefetch    int    // jetfn's explicit prefetch in the budget rows
	Baseline    string // "raw", "raw-budget" or "bare"
	Base, Jetfn Stats
	Paired      Paired
	// Reps is how many repetitions each side ran.
	Reps int
	cfg  Config
}

func newRow(c caseKey, samples [2][]sample, cfg Config) Row {
	return Row{Workload: c.workload, Concurrency: c.concurrency, Size: c.size, Prefetch: c.prefetch,
		Baseline: c.variants()[0], Base: medianStats(samples[0]), Jetfn: medianStats(samples[1]),
		Paired: pairedStats(samples[0], samples[1]), Reps: len(samples[0]), cfg: cfg}
}

// Case names the row: "noop 128B c=16", "budget 128B c=16 P=16",
// "rate 128B c=16 5000/s", "slow 100ms c=1 ackWait 2s ×1000",
// "drain 128B c=1 ×20000", "e2e c=8".
func (r Row) Case() string {
	switch r.Workload {
	case WorkloadSession:
		return fmt.Sprintf("e2e c=%d", r.Concurrency)
	case WorkloadBudget:
		return fmt.Sprintf("budget %s c=%d P=%d", sizeLabel(r.Size), r.Concurrency, r.Prefetch)
	case WorkloadRate:
		return fmt.Sprintf("rate %s c=%d %.0f/s", sizeLabel(r.Size), r.Concurrency, r.cfg.Rate)
	case WorkloadSlow:
		return fmt.Sprintf("slow %s c=%d ackWait %s ×%d", r.cfg.SlowHandler, r.Concurrency, r.cfg.SlowAckWait, r.cfg.SlowMessages)
	case WorkloadDrain:
		return fmt.Sprintf("drain %s c=%d ×%d", sizeLabel(r.Size), r.Concurrency, r.cfg.DrainMessages)
	case WorkloadTrace:
		return fmt.Sprintf("trace off→on %s c=%d", sizeLabel(r.Size), r.Concurrency)
	}
	return fmt.Sprintf("noop %s c=%d", sizeLabel(r.Size), r.Concurrency)
}

// RateRatio is jetfn's throughput over the baseline's (median of pairs).
func (r Row) RateRatio() float64 { return r.Paired.Rate }

// AddedP99Millis is how much jetfn adds to the p99 latency (median of
// pairs).
func (r Row) AddedP99Millis() float64 { return r.Paired.AddedP99Millis }

// AllocRatio and CPURatio are jetfn's per-message cost over the
// baseline's (medians of pairs).
func (r Row) AllocRatio() float64 { return r.Paired.Allocs }
func (r Row) CPURatio() float64   { return r.Paired.CPU }

// hasLatency is false for the drain rows: their messages wait in the
// stream from before the consumer starts, so publish to ack is no latency.
func (r Row) hasLatency() bool { return r.Workload != WorkloadDrain }

func (r Row) latencyCells() []string {
	b, j := r.Base, r.Jetfn
	if !r.hasLatency() {
		return []string{"-", "-", "-", "-", "-", "-", "-"}
	}
	return []string{
		f2(b.P50Millis), f2(j.P50Millis), f2(r.Paired.P50),
		f2(b.P99Millis), f2(j.P99Millis), f2(r.Paired.P99), fmt.Sprintf("%+.2f", r.AddedP99Millis()),
	}
}

func (r Row) cells() []string {
	b, j := r.Base, r.Jetfn
	cells := []string{r.Case(), r.Baseline, f0(b.Rate), f0(j.Rate), f2(r.RateRatio())}
	cells = append(cells, r.latencyCells()...)
	return append(cells,
		f1(b.CPUMicros), f1(j.CPUMicros), f2(r.CPURatio()),
		f1(b.AllocsPerMsg), f1(j.AllocsPerMsg), f2(r.AllocRatio()),
		f0(b.BytesPerMsg), f0(j.BytesPerMsg),
		f1(b.PeakRSSMB), f1(j.PeakRSSMB),
		f0(b.Redeliveries), f0(j.Redeliveries),
	)
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
	"base redeliv", "jetfn redeliv",
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

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
