package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"text/tabwriter"
)

// The performance issue's goals: jetfn against the baseline, case by
// case. They are goals to report, not assertions: a shared machine moves
// the numbers.
const (
	// goalRate: jetfn's msgs/s over raw's, at least, in every budget and
	// noop row and in the drain row at drainGoalConcurrency.
	goalRate = 0.95
	// goalAllocs and goalCPU: jetfn's allocations and CPU per message over
	// the baseline's, at most, in every row judged on cost (judgedOnCost).
	goalAllocs = 1.5
	goalCPU    = 1.3
	// goalAddedP99: the milliseconds jetfn may add to the rate row's p99.
	goalAddedP99 = 0.2
	// goalE2E: the e2e rows' sessions/s over the bare loop's, at least.
	goalE2E = 0.9
	// drainGoalConcurrency is the drain row the throughput goal is about;
	// the other drain rows are shown beside it, judged on cost only.
	drainGoalConcurrency = 1
)

// GoalRow is one case judged against the goals: the figure its own goal
// is about, the baseline's and jetfn's values and their ratio (or
// difference, for latency), and jetfn's per-message cost over the
// baseline's.
type GoalRow struct {
	Goal, Case, Metric string
	Base, Jetfn        string
	Compare            string // jetfn/base ("0.97×") or jetfn−base ("+0.05 ms")
	Target             string // "shown" when the figure has no target
	// Allocs and CPU are jetfn's allocations and CPU per message over the
	// baseline's ("1.42×"), "-" in a row not judged on cost.
	Allocs, CPU string
	// Missed names the targets the row missed: its figure ("msgs/s",
	// "p99", "redeliveries"), "allocs", "CPU".
	Missed []string
}

// Met reports whether the row met every target it has.
func (g GoalRow) Met() bool { return len(g.Missed) == 0 }

// GoalRows lists every case the goals judge, one row each, in run order.
func (r *Report) GoalRows() []GoalRow {
	var out []GoalRow
	for _, row := range r.Rows {
		g, ok := ownGoal(row)
		if !ok {
			continue
		}
		g.Allocs, g.CPU = "-", "-"
		if judgedOnCost(row) {
			g.Allocs, g.CPU = fmt.Sprintf("%.2f×", row.AllocRatio()), fmt.Sprintf("%.2f×", row.CPURatio())
			if row.AllocRatio() > goalAllocs {
				g.Missed = append(g.Missed, "allocs")
			}
			if row.CPURatio() > goalCPU {
				g.Missed = append(g.Missed, "CPU")
			}
		}
		out = append(out, g)
	}
	return out
}

// ownGoal is the goal row of a case's own figure, before its cost.
func ownGoal(row Row) (GoalRow, bool) {
	b, j := row.Base, row.Jetfn
	switch row.Workload {
	case WorkloadBudget:
		return rateGoal("same in-flight budget", row, goalRate), true
	case WorkloadNoop:
		return rateGoal("derived prefetch vs raw's 500 buffer", row, goalRate), true
	case WorkloadDrain:
		g := rateGoal("backlog drain", row, goalRate)
		if row.Concurrency != drainGoalConcurrency {
			g.Target, g.Missed = "shown", nil
		}
		return g, true
	case WorkloadRate:
		g := GoalRow{Goal: "added p99 at a fixed rate", Case: row.Case(), Metric: "p99 publish→ack ms " + p99Basis(row),
			Base: f2(b.P99Millis), Jetfn: f2(j.P99Millis),
			Compare: fmt.Sprintf("%+.2f ms", row.AddedP99Millis()) + row.rangeNote(row.Paired.AddedP99Range, "%+.2f"),
			Target:  fmt.Sprintf("≤ %+.2f ms", goalAddedP99)}
		if row.AddedP99Millis() > goalAddedP99 {
			g.Missed = []string{"p99"}
		}
		return g, true
	case WorkloadSlow:
		g := GoalRow{Goal: "no redelivery of buffered messages", Case: row.Case(), Metric: "redeliveries (server)",
			Base: slowCell(b), Jetfn: slowCell(j), Compare: "-", Target: "jetfn 0"}
		if j.Redeliveries != 0 {
			g.Missed = []string{"redeliveries"}
		}
		return g, true
	case WorkloadSession:
		g := rateGoal("e2e vs the bare loop", row, goalE2E)
		g.Metric = "sessions/s"
		return g, true
	}
	return GoalRow{}, false
}

// judgedOnCost leaves out the slow row: raw's is cut off at SlowLimit
// after handling duplicates, so the two sides' per-message figures divide
// different work. The trace row compares jetfn with itself, not with a
// baseline; its cost is shown, not judged.
func judgedOnCost(row Row) bool { return row.Workload != WorkloadSlow && row.Workload != WorkloadTrace }

func rateGoal(goal string, row Row, limit float64) GoalRow {
	g := GoalRow{Goal: goal, Case: row.Case(), Metric: "msgs/s",
		Base: f0(row.Base.Rate), Jetfn: f0(row.Jetfn.Rate),
		Compare: fmt.Sprintf("%.2f×", row.RateRatio()) + row.rangeNote(row.Paired.RateRange, "%.2f"),
		Target:  fmt.Sprintf("≥ %.2f×", limit)}
	if row.RateRatio() < limit {
		g.Missed = []string{"msgs/s"}
	}
	return g
}

// rangeNote is " (lo–hi)", the range that holds the pairs' true median
// (see medianRange), or "" with a single pair.
func (r Row) rangeNote(lohi [2]float64, format string) string {
	if r.Reps < 2 {
		return ""
	}
	return " (" + fmt.Sprintf(format, lohi[0]) + "–" + fmt.Sprintf(format, lohi[1]) + ")"
}

// p99Basis says how many latencies the rate row's p99 is over and how
// much traffic lies above it: one stall of the machine as long as that
// traffic takes to publish sets the p99 by itself.
func p99Basis(row Row) string {
	n := int(min(row.Base.Latencies, row.Jetfn.Latencies))
	above := n - (n*99+99)/100 // the nearest rank, as percentile takes it
	return fmt.Sprintf("over %d msgs (%d above it = %.1f ms of traffic)", n, above, float64(above)/row.cfg.Rate*1e3)
}

// slowCell is the redelivery count with what else explains it: how many
// messages were acked in the time and how many InProgress were sent.
func slowCell(s Stats) string {
	return fmt.Sprintf("%.0f (acked %.0f in %.0f s, %.0f acks of redeliveries, %.0f +WPI)",
		s.Redeliveries, s.Acked, s.Seconds, s.RedeliveredAcks, s.InProgress)
}

var goalHeader = []string{"goal", "case", "figure", "base", "jetfn", "jetfn vs base (range)", "target",
	fmt.Sprintf("allocs/msg × (≤ %.2f×)", goalAllocs), fmt.Sprintf("CPU/msg × (≤ %.2f×)", goalCPU), "met"}

func (g GoalRow) cells(missed string) []string {
	met := "yes"
	if !g.Met() {
		met = missed + ": " + strings.Join(g.Missed, ", ")
	}
	return []string{g.Goal, g.Case, g.Metric, g.Base, g.Jetfn, g.Compare, g.Target, g.Allocs, g.CPU, met}
}

// WriteGoals prints the goal rows as an aligned text table.
func (r *Report) WriteGoals(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(goalHeader, "\t")+"\t")
	for _, g := range r.GoalRows() {
		fmt.Fprintln(tw, strings.Join(g.cells("NO"), "\t")+"\t")
	}
	return tw.Flush()
}

// writeGoalsMarkdown prints the goal rows as a Markdown table.
func (r *Report) writeGoalsMarkdown(w io.Writer) {
	fmt.Fprintln(w, "| "+strings.Join(goalHeader, " | ")+" |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|---|--:|--:|---|")
	for _, g := range r.GoalRows() {
		fmt.Fprintln(w, "| "+strings.Join(g.cells("**no**"), " | ")+" |")
	}
}

// Target is one goal over every row it judges, and whether this run met
// it.
type Target struct {
	Goal   string
	Met    bool
	Detail string // the worst case
}

// Targets checks the run against the goals, each judged by its worst row;
// a goal without rows in this run is left out.
func (r *Report) Targets() []Target {
	var out []Target
	judge := func(name string, rows []Row, value func(Row) float64, g goal, format string) {
		if len(rows) > 0 {
			out = append(out, check(name, rows, value, g, format))
		}
	}
	// judgeRate also says how firm the verdict is (resampledMet).
	judgeRate := func(name string, rows []Row, limit float64) {
		if len(rows) > 0 {
			t := check(name, rows, Row.RateRatio, atLeast(limit), "%.2f×")
			t.Detail += resampledNote(rows, func(r Row) []float64 { return r.Paired.Rates }, atLeast(limit))
			out = append(out, t)
		}
	}
	judgeRate(fmt.Sprintf("same in-flight budget: throughput ≥ %.2f× raw", goalRate), r.rows(WorkloadBudget), goalRate)
	judgeRate(fmt.Sprintf("derived prefetch vs raw's 500 buffer: throughput ≥ %.2f×", goalRate), r.rows(WorkloadNoop), goalRate)
	drain := r.where(func(row Row) bool { return row.Workload == WorkloadDrain && row.Concurrency == drainGoalConcurrency })
	judgeRate(fmt.Sprintf("backlog drain at c=%d: throughput ≥ %.2f× raw", drainGoalConcurrency, goalRate), drain, goalRate)
	cost := r.where(judgedOnCost)
	judge(fmt.Sprintf("allocations per message ≤ %.2f× the baseline, every row but slow", goalAllocs),
		cost, Row.AllocRatio, atMost(goalAllocs), "%.2f×")
	judge(fmt.Sprintf("CPU per message ≤ %.2f× the baseline, every row but slow", goalCPU),
		cost, Row.CPURatio, atMost(goalCPU), "%.2f×")
	if rate := r.rows(WorkloadRate); len(rate) > 0 {
		t := check(fmt.Sprintf("open loop: p99 added latency ≤ %.2f ms", goalAddedP99),
			rate, Row.AddedP99Millis, atMost(goalAddedP99), "%+.2f ms")
		t.Detail += "; p99 " + p99Basis(rate[0]) +
			resampledNote(rate, func(r Row) []float64 { return r.Paired.AddedP99s }, atMost(goalAddedP99))
		out = append(out, t)
	}
	if slow := r.rows(WorkloadSlow); len(slow) > 0 {
		t := check("slow handler: 0 redeliveries", slow, func(r Row) float64 { return r.Jetfn.Redeliveries }, atMost(0), "%.0f")
		t.Detail += fmt.Sprintf("; raw: %.0f", slow[0].Base.Redeliveries)
		out = append(out, t)
	}
	judgeRate(fmt.Sprintf("e2e throughput ≥ %.2f× bare", goalE2E), r.rows(WorkloadSession), goalE2E)
	return out
}

// resamples is how many times resampledMet draws a run's pairs again.
const resamples = 1000

// resampledMet is how firm a run's verdict on a goal is on its own pairs:
// how often the goal would have been met had the run drawn its pairs again.
// Each row's pairs are drawn anew from its own, with replacement (a
// bootstrap), the median taken again, and the goal judged on the worst row,
// resamples times. A verdict met in about half of them rests on a pair or
// two; one met in nearly all of them does not. It cannot see what moves
// from run to run (a machine in a slower phase), so it says how firm this
// verdict is, not how often a rerun meets the goal. The seed is fixed, so
// the same run gives the same figure. ok is false when a row has fewer
// than two pairs.
func resampledMet(rows []Row, pairs func(Row) []float64, g goal) (met int, ok bool) {
	rng := rand.New(rand.NewPCG(16, 16))
	var drawn []float64
	for range resamples {
		all := true
		for _, row := range rows {
			p := pairs(row)
			if len(p) < 2 {
				return 0, false
			}
			drawn = drawn[:0]
			for range p {
				drawn = append(drawn, p[rng.IntN(len(p))])
			}
			all = g.meets(median(drawn)) && all
		}
		if all {
			met++
		}
	}
	return met, true
}

// resampledNote is "; met in 412 of 1000 resamples of the pairs", or ""
// when resampledMet cannot tell. A count, not a rounded percentage, so 996
// does not read as all of them.
func resampledNote(rows []Row, pairs func(Row) []float64, g goal) string {
	met, ok := resampledMet(rows, pairs, g)
	if !ok {
		return ""
	}
	return fmt.Sprintf("; met in %d of %d resamples of the pairs", met, resamples)
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
	return r.where(func(row Row) bool { return row.Workload == workload })
}

func (r *Report) where(keep func(Row) bool) []Row {
	var out []Row
	for _, row := range r.Rows {
		if keep(row) {
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
