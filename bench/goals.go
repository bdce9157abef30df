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
