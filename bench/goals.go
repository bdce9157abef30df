package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// GoalRow is one case judged against the prefetch issue's goals: the
// figure the goal is about, raw's and jetfn's values, and their ratio (or
// difference, for latency).
type GoalRow struct {
	Goal, Case, Metric string
	Base, Jetfn        string
	Compare            string // jetfn/raw ("0.97×") or jetfn−raw ("+0.05 ms")
	Target             string
	Met                bool
}

// GoalRows lists every case the issue has a goal for, one row each, in run
// order. They are goals to report, not assertions.
func (r *Report) GoalRows() []GoalRow {
	var out []GoalRow
	for _, row := range r.Rows {
		b, j := row.Base, row.Jetfn
		switch row.Workload {
		case WorkloadBudget:
			out = append(out, rateGoal("same in-flight budget", row, 0.95))
		case WorkloadNoop:
			out = append(out, rateGoal("derived prefetch vs raw's 500 buffer", row, 0.9))
		case WorkloadRate:
			out = append(out, GoalRow{Goal: "added p99 at a fixed rate", Case: row.Case(), Metric: "p99 publish→ack ms",
				Base: f2(b.P99Millis), Jetfn: f2(j.P99Millis), Compare: fmt.Sprintf("%+.2f ms", row.AddedP99Millis()),
				Target: "≤ +0.20 ms", Met: row.AddedP99Millis() <= 0.2})
		case WorkloadSlow:
			out = append(out, GoalRow{Goal: "no redelivery of buffered messages", Case: row.Case(), Metric: "redeliveries (server)",
				Base: slowCell(b), Jetfn: slowCell(j), Compare: "-", Target: "jetfn 0", Met: j.Redeliveries == 0})
		}
	}
	return out
}

func rateGoal(goal string, row Row, limit float64) GoalRow {
	return GoalRow{Goal: goal, Case: row.Case(), Metric: "msgs/s",
		Base: f0(row.Base.Rate), Jetfn: f0(row.Jetfn.Rate), Compare: fmt.Sprintf("%.2f×", row.RateRatio()),
		Target: fmt.Sprintf("≥ %.2f×", limit), Met: row.RateRatio() >= limit}
}

// slowCell is the redelivery count with what else explains it: how many
// messages were acked in the time and how many InProgress were sent.
func slowCell(s Stats) string {
	return fmt.Sprintf("%.0f (acked %.0f in %.0f s, %.0f acks of redeliveries, %.0f +WPI)",
		s.Redeliveries, s.Acked, s.Seconds, s.RedeliveredAcks, s.InProgress)
}

var goalHeader = []string{"goal", "case", "figure", "raw", "jetfn", "jetfn vs raw", "target", "met"}

func (g GoalRow) cells(missed string) []string {
	met := "yes"
	if !g.Met {
		met = missed
	}
	return []string{g.Goal, g.Case, g.Metric, g.Base, g.Jetfn, g.Compare, g.Target, met}
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
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|---|---|")
	for _, g := range r.GoalRows() {
		fmt.Fprintln(w, "| "+strings.Join(g.cells("**no**"), " | ")+" |")
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
	if budget := r.rows(WorkloadBudget); len(budget) > 0 {
		out = append(out, check("same in-flight budget: throughput ≥ 0.95× raw", budget, Row.RateRatio, atLeast(0.95), "%.2f×"))
	}
	if len(noop) > 0 {
		out = append(out,
			check("derived prefetch vs raw's 500 buffer: throughput ≥ 0.9×", noop, Row.RateRatio, atLeast(0.9), "%.2f×"),
			check("closed loop: p99 added latency < 0.5 ms", noop, Row.AddedP99Millis, below(0.5), "%+.2f ms"),
			check("allocations per message ≤ 2× raw", noop, allocRatio, atMost(2), "%.2f×"))
	}
	if rate := r.rows(WorkloadRate); len(rate) > 0 {
		out = append(out, check("open loop: p99 added latency ≤ 0.2 ms", rate, Row.AddedP99Millis, atMost(0.2), "%+.2f ms"))
	}
	if slow := r.rows(WorkloadSlow); len(slow) > 0 {
		t := check("slow handler: 0 redeliveries", slow, func(r Row) float64 { return r.Jetfn.Redeliveries }, atMost(0), "%.0f")
		t.Detail += fmt.Sprintf("; raw: %.0f", slow[0].Base.Redeliveries)
		out = append(out, t)
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
