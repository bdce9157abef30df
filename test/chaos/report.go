package chaos

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
)

// Row is one fault kind's sessions and faults.
type Row struct {
	Kind   Kind
	Faults int
	// Sessions ended under this kind (from a fault's start to the next's);
	// Acked of them were acknowledged, Retried of those needed more than
	// one publish, Unknown never were (UnknownHandled of those were
	// summarized anyway: stored, their ack lost).
	Sessions, Acked, Retried, Unknown, UnknownHandled int
	// Lost are acknowledged sessions without a summary or a notification
	// (LostByNATS of them gone from the stream); Duplicates have more than
	// one of either.
	Lost, LostByNATS, Duplicates int
	// DeadLettered are acknowledged sessions without a summary or a
	// notification whose session-ended is in the dead-letter stream: not
	// lost (jetfn dlq replay brings them back), but not done either.
	DeadLettered int
	// Stalls is each fault's longest time with no session handled;
	// Recoveries the time from the fault to the first session published
	// after it being handled; Rejoins from the node's restart (or SIGCONT)
	// to every node healthy.
	Stalls, Recoveries, Rejoins []time.Duration
}

// Report is one run's result.
type Report struct {
	Sync        string
	Rows        []*Row
	Faults      []Fault
	DeadLetters uint64
	// Settled is false when the end of the run gave up waiting.
	Settled bool
	// FailedStarts counts jetfn starts that exited before they were ready
	// (and were started again).
	FailedStarts int
	// Recording is the check of the recording events; nil before it ran.
	Recording *RecordingReport
	// Problems names every lost and duplicated session, and every lost,
	// duplicated and out-of-order recording event.
	Problems []string
}

// RecordingReport is the check of publish-recording-event's events: how
// many the recording publisher published, for how many recordings, how
// many notices NOTIFICATIONS holds, and a row per fault kind.
type RecordingReport struct {
	// PerKey is how the manifest ran the function ("ordered: true").
	PerKey                      string
	Recordings, Events, Notices int
	Rows                        []*RecordingRow
}

// RecordingRow is one fault kind's recording events (first published from
// a fault's start to the next's).
type RecordingRow struct {
	Kind Kind
	// Events were published under this kind; Acked of them were
	// acknowledged, Retried of those needed more than one publish, Unknown
	// never were (UnknownNoticed of those were noticed anyway).
	Events, Acked, Retried, Unknown, UnknownNoticed int
	// Lost are acknowledged events without a notice (LostByNATS of them
	// not in RECORDING); DeadLettered those without a notice in the
	// dead-letter stream. Duplicates have more than one notice.
	Lost, LostByNATS, DeadLettered, Duplicates int
	// OutOfOrder are events whose notice NOTIFICATIONS stored before the
	// notice of an event of the same recording that RECORDING stored
	// before them.
	OutOfOrder int
}

func (r *RecordingReport) row(rows map[Kind]*RecordingRow, k Kind) *RecordingRow {
	return rowOf(rows, &r.Rows, k, &RecordingRow{Kind: k})
}

func (r *Report) row(rows map[Kind]*Row, k Kind) *Row {
	return rowOf(rows, &r.Rows, k, &Row{Kind: k})
}

// rowOf returns kind k's row, adding fresh to rows and to the report's
// list, in the order kinds first appear, when k has none yet.
func rowOf[R any](rows map[Kind]*R, list *[]*R, k Kind, fresh *R) *R {
	if row, ok := rows[k]; ok {
		return row
	}
	rows[k] = fresh
	*list = append(*list, fresh)
	return fresh
}

// OK reports whether every acknowledged session ended as one summary and
// one notification, and every acknowledged recording event as one notice,
// in its recording's order: none lost, duplicated, dead-lettered or out of
// order.
func (r *Report) OK() bool {
	for _, row := range r.Rows {
		if row.Lost > 0 || row.Duplicates > 0 || row.DeadLettered > 0 {
			return false
		}
	}
	if r.Recording != nil {
		for _, row := range r.Recording.Rows {
			if row.Lost > 0 || row.Duplicates > 0 || row.DeadLettered > 0 || row.OutOfOrder > 0 {
				return false
			}
		}
	}
	return true
}

// firstAttempts looks up when a session was first published.
type firstAttempts interface {
	FirstAttempt(key string) (time.Time, bool)
}

// measure fills in a fault's stall and recovery from the notifications
// (sorted by the time the server stored them; its clock is the same
// machine's as the harness's). The fault's window ends when the next one
// begins (or the publisher stopped): the next fault waits until the
// cluster is healthy and sessions published after it are handled again, so
// every stall the fault caused is inside.
func measure(f *Fault, until time.Time, notes []testkit.Notification, pubs firstAttempts) {
	stored := make([]time.Time, len(notes))
	for i, n := range notes {
		stored[i] = n.Stored
	}
	f.Stall = longestGap(stored, f.At, until)
	f.Recovery, f.Recovered = recovery(f.At, notes, pubs)
}

// addFault adds one measured fault to its row.
func (row *Row) addFault(f Fault) {
	row.Faults++
	row.Stalls = append(row.Stalls, f.Stall)
	row.Rejoins = append(row.Rejoins, f.Healthy.Sub(f.Restored))
	if f.Recovered {
		row.Recoveries = append(row.Recoveries, f.Recovery)
	}
}

// recovery is the time from at to the first notification of a session
// first published after at.
func recovery(at time.Time, notes []testkit.Notification, pubs firstAttempts) (time.Duration, bool) {
	for _, n := range notes {
		if n.Stored.Before(at) {
			continue
		}
		if first, ok := pubs.FirstAttempt(n.Key); ok && first.After(at) {
			return n.Stored.Sub(at), true
		}
	}
	return 0, false
}

// longestGap is the longest stretch of [from, to] with no time in sorted.
func longestGap(sorted []time.Time, from, to time.Time) time.Duration {
	prev, gap := from, time.Duration(0)
	for _, t := range sorted {
		if t.Before(from) {
			continue
		}
		if t.After(to) {
			break
		}
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	return max(gap, to.Sub(prev))
}

// WriteMarkdown prints the table as docs/production.md shows it.
func (r *Report) WriteMarkdown(w io.Writer) {
	sync := r.Sync
	if sync == "" {
		sync = "default (2m)"
	}
	fmt.Fprintf(w, "sync_interval: %s; %d faults; %d dead letters; settled: %t; jetfn starts that exited before ready (started again): %d\n\n",
		sync, len(r.Faults), r.DeadLetters, r.Settled, r.FailedStarts)
	fmt.Fprintln(w, "| fault | faults | sessions | acked | lost | duplicate | dead-lettered | unknown (summarized) | publish retried | longest stall median / max | recovery median / max | node rejoined median / max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		lost := lostCell(row.Lost, row.LostByNATS, "gone from the stream")
		fmt.Fprintf(w, "| %s | %d | %d | %d | %s | %d | %d | %d (%d) | %d | %s | %s | %s |\n", row.Kind, row.Faults, row.Sessions,
			row.Acked, lost, row.Duplicates, row.DeadLettered, row.Unknown, row.UnknownHandled, row.Retried,
			spread(row.Stalls), spread(row.Recoveries), spread(row.Rejoins))
	}
	if r.Recording != nil {
		r.Recording.writeMarkdown(w)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "\n-", p)
	}
}

// lostCell is a table's lost count, with how many of them the input
// stream no longer holds (those NATS lost, not jetfn), in the table's words.
func lostCell(lost, byNATS int, gone string) string {
	if byNATS == 0 {
		return fmt.Sprint(lost)
	}
	return fmt.Sprintf("%d (%d %s)", lost, byNATS, gone)
}

// writeMarkdown prints the recording events' table.
func (r *RecordingReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "\n%s, key recordingId (%s): %d recordings, %d events published, %d notices stored\n\n",
		recordingFunction, r.PerKey, r.Recordings, r.Events, r.Notices)
	fmt.Fprintln(w, "| fault | events | acked | lost | duplicate | dead-lettered | out of order | unknown (noticed) | publish retried |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		lost := lostCell(row.Lost, row.LostByNATS, "not in the stream")
		fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %d | %d | %d (%d) | %d |\n", row.Kind, row.Events, row.Acked, lost,
			row.Duplicates, row.DeadLettered, row.OutOfOrder, row.Unknown, row.UnknownNoticed, row.Retried)
	}
}

// spread is "median / max" of ds, or "-" for none.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%s / %s", round(s[len(s)/2]), round(s[len(s)-1]))
}

func round(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }

// WriteFaults lists every fault: who led, where the publisher was
// connected, and what it cost.
func (r *Report) WriteFaults(w io.Writer) {
	for i, f := range r.Faults {
		jetfn := ""
		if f.Jetfn >= 0 {
			jetfn = fmt.Sprintf(", jetfn instance %d killed", f.Jetfn+1)
		}
		if !f.RecoveredDown {
			jetfn += fmt.Sprintf(", nothing handled while it was down (%s)", recoverWithin)
		}
		fmt.Fprintf(w, "%2d %s: %s (stream leader %s, consumer leader %s, publisher on %s%s): stall %s, recovery %s, rejoined %s\n",
			i+1, f.Kind, f.Victim, f.StreamLeader, f.ConsumerLeader, f.PublisherOn, jetfn,
			round(f.Stall), round(f.Recovery), round(f.Healthy.Sub(f.Restored)))
	}
}
