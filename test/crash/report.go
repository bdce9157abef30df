package crash

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one line of the table: every run of one point or batch.
type Row struct {
	Point string
	// WantSummaries and WantNotifications are what each run must store:
	// 1 and 1, except in the short-window control (2 notifications, to
	// prove the harness can fail) and in max-deliveries-all-down (none of
	// either: its message is dead-lettered without a handler result).
	WantSummaries     int
	WantNotifications int
	// WantDeadLetters is how many dead letters each run must store; rows
	// that leave it zero do not count them per run.
	WantDeadLetters  int
	Runs             int
	OneSummary       int
	OneNotification  int
	OneDeadLetter    int
	MaxSummaries     int
	MaxNotifications int
	Recoveries       []time.Duration
	// BadDeadLetters are the ways a stored dead letter differed from its
	// original.
	BadDeadLetters []string
	// Order are the breaks of per-key order the ordered rows' checker
	// found (ordercheck.go).
	Order  []string
	Errors []string
	// Wall is how long the row took.
	Wall time.Duration
	// Note is extra evidence for the row (naks seen, dead letters).
	Note string
}

// addAll adds the results of a pass over many sessions and its error.
func (r *Row) addAll(res []Result, err error) {
	for _, x := range res {
		r.add(x)
	}
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
}

func (r *Row) add(res Result) {
	r.Runs++
	if res.Summaries == 1 {
		r.OneSummary++
	}
	if res.Notifications == 1 {
		r.OneNotification++
	}
	if res.DeadLetters == 1 {
		r.OneDeadLetter++
	}
	r.MaxSummaries = max(r.MaxSummaries, res.Summaries)
	r.MaxNotifications = max(r.MaxNotifications, res.Notifications)
	if res.Recovery > 0 {
		r.Recoveries = append(r.Recoveries, res.Recovery)
	}
	r.BadDeadLetters = append(r.BadDeadLetters, res.BadDeadLetter...)
	if res.Err != nil {
		r.Errors = append(r.Errors, res.Err.Error())
	}
}

// Problems says why the row fails: a duplicate, a lost session, a lost or
// altered dead letter, a break of per-key order, a run that could not be
// judged, or a short-window control without its second notification.
func (r Row) Problems() []string {
	var p []string
	if r.Runs == 0 {
		p = append(p, "no runs")
	}
	p = append(p, r.summaryProblems()...)
	p = append(p, r.notificationProblems()...)
	p = append(p, r.deadLetterProblems()...)
	for _, o := range r.Order {
		p = append(p, "order: "+o)
	}
	for _, e := range r.Errors {
		p = append(p, "run error: "+e)
	}
	return p
}

func (r Row) summaryProblems() []string {
	return r.countProblems("summary", r.WantSummaries, r.MaxSummaries, r.OneSummary)
}

func (r Row) notificationProblems() []string {
	if r.WantNotifications > 1 && (r.MaxNotifications != r.WantNotifications || r.OneNotification > 0) {
		return []string{fmt.Sprintf("control: want %d notifications in every run (the window must expire), got max %d, %d runs with 1",
			r.WantNotifications, r.MaxNotifications, r.OneNotification)}
	}
	return r.countProblems("notification", r.WantNotifications, r.MaxNotifications, r.OneNotification)
}

// countProblems judges one kind of effect (a summary, a notification) that
// a row wants none of or exactly one of in every run: most is the largest
// count a run saw, once the runs that saw exactly one.
func (r Row) countProblems(kind string, want, most, once int) []string {
	switch {
	case want == 0 && most > 0:
		return []string{fmt.Sprintf("want no %s, got up to %d in a run", kind, most)}
	case want == 1 && once != r.Runs:
		return []string{fmt.Sprintf("%d of %d runs without exactly one %s", r.Runs-once, r.Runs, kind)}
	}
	return nil
}

func (r Row) deadLetterProblems() []string {
	if r.WantDeadLetters == 0 {
		return nil
	}
	var p []string
	if r.OneDeadLetter != r.Runs {
		p = append(p, fmt.Sprintf("%d of %d runs without exactly one dead letter", r.Runs-r.OneDeadLetter, r.Runs))
	}
	for _, b := range r.BadDeadLetters {
		p = append(p, "dead letter: "+b)
	}
	return p
}

// Report is the whole table.
type Report struct {
	Rows []Row
	Wall time.Duration
}

// OK reports whether every row passed.
func (rep Report) OK() bool {
	for _, r := range rep.Rows {
		if len(r.Problems()) > 0 {
			return false
		}
	}
	return true
}

// Write prints the table, then each failing row's problems.
func (rep Report) Write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "point\truns\t1 summary\t1 notification\tmax summaries\tmax notifications\trecovery median\trecovery max\twall\tverdict\t")
	for _, r := range rep.Rows {
		med, mx := stats(r.Recoveries)
		verdict := "ok"
		if len(r.Problems()) > 0 {
			verdict = "FAIL"
		}
		if verdict == "ok" {
			verdict += r.expected()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", r.Point, r.Runs, r.OneSummary, r.OneNotification,
			r.MaxSummaries, r.MaxNotifications, med, mx, r.Wall.Round(time.Second), verdict)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "total wall time %s\n", rep.Wall.Round(time.Second))
	for _, r := range rep.Rows {
		if r.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Point, r.Note)
		}
		for _, p := range r.Problems() {
			fmt.Fprintf(w, "FAIL %s: %s\n", r.Point, strings.TrimSpace(p))
		}
	}
}

// WriteMarkdown prints the table in the README's columns, rows ready to
// paste under "How we test crashes"; a failing row's verdict follows its
// name.
func (rep Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintln(w, "| point | runs | exactly 1 summary | exactly 1 notification | max summaries | max notifications | recovery median / max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rep.Rows {
		med, mx := stats(r.Recoveries)
		recovery := "–"
		if len(r.Recoveries) > 0 {
			recovery = strings.TrimSuffix(med, "s") + " / " + strings.TrimSuffix(mx, "s") + " s"
		}
		name := r.Point
		if len(r.Problems()) > 0 {
			name += " **FAIL**"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %s |\n", name, r.Runs, r.OneSummary, r.OneNotification,
			r.MaxSummaries, r.MaxNotifications, recovery)
	}
}

// expected explains an ok verdict on a row whose counts are not 1 and 1.
func (r Row) expected() string {
	switch {
	case r.WantNotifications > 1:
		return fmt.Sprintf(" (control: %d expected)", r.WantNotifications)
	case r.WantDeadLetters > 0:
		return fmt.Sprintf(" (%d dead letter, no summary expected)", r.WantDeadLetters)
	}
	return ""
}

// stats returns the median and the maximum, or "-" for none.
func stats(ds []time.Duration) (string, string) {
	if len(ds) == 0 {
		return "-", "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmtDur(med), fmtDur(s[len(s)-1])
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
