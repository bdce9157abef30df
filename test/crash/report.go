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
	Point             string
	WantNotifications int
	Runs              int
	OneSummary        int
	OneNotification   int
	MaxSummaries      int
	MaxNotifications  int
	Recoveries        []time.Duration
	Errors            []string
	// Wall is how long the row took.
	Wall time.Duration
	// Note is extra evidence for the row (naks seen, dead letters).
	Note string
}

func (r *Row) add(res Result) {
	r.Runs++
	if res.Summaries == 1 {
		r.OneSummary++
	}
	if res.Notifications == 1 {
		r.OneNotification++
	}
	r.MaxSummaries = max(r.MaxSummaries, res.Summaries)
	r.MaxNotifications = max(r.MaxNotifications, res.Notifications)
	if res.Recovery > 0 {
		r.Recoveries = append(r.Recoveries, res.Recovery)
	}
	if res.Err != nil {
		r.Errors = append(r.Errors, res.Err.Error())
	}
}

// Problems says why the row fails: a duplicate, a lost session, a run that
// could not be judged, or a short-window control without its second
// notification.
func (r Row) Problems() []string {
	var p []string
	if r.Runs == 0 {
		p = append(p, "no runs")
	}
	if r.OneSummary != r.Runs {
		p = append(p, fmt.Sprintf("%d of %d runs without exactly one summary", r.Runs-r.OneSummary, r.Runs))
	}
	if r.WantNotifications == 1 && r.OneNotification != r.Runs {
		p = append(p, fmt.Sprintf("%d of %d runs without exactly one notification", r.Runs-r.OneNotification, r.Runs))
	}
	if r.WantNotifications > 1 && (r.MaxNotifications != r.WantNotifications || r.OneNotification > 0) {
		p = append(p, fmt.Sprintf("control: want %d notifications in every run (the window must expire), got max %d, %d runs with 1",
			r.WantNotifications, r.MaxNotifications, r.OneNotification))
	}
	for _, e := range r.Errors {
		p = append(p, "run error: "+e)
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
		if r.WantNotifications > 1 && verdict == "ok" {
			verdict = fmt.Sprintf("ok (control: %d expected)", r.WantNotifications)
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
