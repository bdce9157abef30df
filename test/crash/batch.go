package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
)

// Disruption is what a batch does while its sessions are in flight.
type Disruption int

const (
	// KillChild SIGKILLs the child and restarts it at once.
	KillChild Disruption = iota
	// RestartNATS stops the harness's nats-server and starts it again on
	// the same port and store directory; the child stays up and reconnects.
	RestartNATS
	// RestartMongo stops the Mongo-compatible server and starts it again on
	// the same port and data directory; the child stays up.
	RestartMongo
)

func (d Disruption) String() string {
	switch d {
	case RestartNATS:
		return "nats-restart"
	case RestartMongo:
		return "mongo-outage"
	default:
		return "random"
	}
}

// Batch is many sessions in flight, disrupted at uniformly random moments.
type Batch struct {
	Disrupt Disruption
	// Sessions are published per cycle; each cycle ends with one
	// disruption at a random moment of the time the batch needs.
	Sessions int
	Cycles   int
	// Down is how long a restarted server stays down.
	Down time.Duration
}

// stallTimeout is how long a batch may go without a new notification
// before its unannounced sessions count as lost: longer than the
// manifest's handler timeout (2m) plus its longest backoff (30s).
const stallTimeout = 150 * time.Second

// RunBatch runs b and returns its row: one "run" per session.
func (h *Harness) RunBatch(ctx context.Context, b Batch) Row {
	row := Row{Point: fmt.Sprintf("%s (%dx%d sessions)", b.Disrupt, b.Cycles, b.Sessions),
		WantSummaries: 1, WantNotifications: 1}
	res, err := h.runBatch(ctx, b, &row)
	err = h.stopChildAfter(err)
	row.addAll(res, err)
	h.opts.Log.Info("batch", "point", row.Point, "sessions", row.Runs, "one_summary", row.OneSummary,
		"one_notification", row.OneNotification, "err", err)
	return row
}

func (h *Harness) runBatch(ctx context.Context, b Batch, row *Row) ([]Result, error) {
	from, err := h.startDayRun(ctx, b.Disrupt.String())
	if err != nil {
		return nil, err
	}
	dlFrom, err := nextSeq(ctx, h.stack.js, deadLetterStream)
	if err != nil {
		return nil, err
	}
	var all []session
	var notes []testkit.Notification
	var restarts []time.Time
	var inFlight []int
	var settleTimes []time.Duration
	var settleErr error
	for cycle := range b.Cycles {
		ss := h.newSessions(cycle, b.Sessions)
		if err := h.publishAll(ctx, ss); err != nil {
			return nil, err
		}
		all = append(all, ss...)
		time.Sleep(b.moment(h.busyTime(b.Sessions)))
		inFlight = append(inFlight, h.unannounced(ctx, all, from))
		restart, err := h.disrupt(ctx, b)
		if err != nil {
			return nil, err
		}
		restarts = append(restarts, restart)
		// Each cycle's sessions settle before the next are published, so
		// a batch is what is in flight, not a growing backlog.
		notes, settleErr = h.settleBatch(ctx, all, from)
		settleTimes = append(settleTimes, time.Since(restart).Round(100*time.Millisecond))
		if settleErr != nil {
			break
		}
	}
	err = settleErr
	res, cerr := h.batchResults(ctx, all, notes)
	if cerr != nil && err == nil {
		err = cerr
	}
	row.Recoveries = batchRecoveries(notes, restarts)
	note, dead := h.batchNote(ctx, dlFrom)
	row.Note = fmt.Sprintf("sessions not yet announced at each disruption %v, all settled after %v; %s",
		inFlight, settleTimes, note)
	if dead > 0 && err == nil {
		err = fmt.Errorf("%d sessions dead-lettered", dead)
	}
	return res, err
}

// moment picks when to disrupt, within busy, the time the batch needs: a
// uniformly random moment for a kill; for a server restart a random moment
// in its first half, so the outage hits work in flight.
func (b Batch) moment(busy time.Duration) time.Duration {
	if b.Disrupt == KillChild {
		return rand.N(busy)
	}
	return busy/10 + rand.N(busy/2)
}

// unannounced counts the sessions without a notification yet; -1 if the
// stream cannot be read.
func (h *Harness) unannounced(ctx context.Context, all []session, from uint64) int {
	ns, err := testkit.ScanNotifications(ctx, h.stack.js, transcriptionStream, from)
	if err != nil {
		return -1
	}
	return missing(all, ns)
}

// busyTime is about how long the child needs for n sessions: waves of
// `concurrency` handlers, each waiting at least one quiet period.
func (h *Harness) busyTime(n int) time.Duration {
	waves := (n + concurrency - 1) / concurrency
	return time.Duration(waves) * h.opts.Quiet
}

func (h *Harness) newSessions(cycle, n int) []session {
	ss := make([]session, n)
	for i := range ss {
		ss[i] = session{conversationID: fmt.Sprintf("conv-%03d", h.runs),
			sessionID: fmt.Sprintf("b%03d-%02d-%03d", h.runs, cycle, i), segments: rand.IntN(segmentsPerSession + 1)}
	}
	return ss
}

// publishAll seeds and publishes every session, retrying while a server is
// coming back: both steps are idempotent (segment _ids, message IDs).
func (h *Harness) publishAll(ctx context.Context, ss []session) error {
	db := h.stack.DB(h.db)
	for _, s := range ss {
		err := retry(ctx, func() error {
			if err := seed(ctx, db, s); err != nil && !isDuplicateKey(err) {
				return err
			}
			return publishEnded(ctx, h.stack.js, s)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func isDuplicateKey(err error) bool {
	return strings.Contains(err.Error(), "duplicate key")
}

// disrupt applies the batch's disruption and returns when the system is
// back: the child restarted, or the server up again.
func (h *Harness) disrupt(ctx context.Context, b Batch) (time.Time, error) {
	h.opts.Log.Info("disrupting", "disruption", b.Disrupt)
	switch b.Disrupt {
	case RestartNATS:
		err := h.stack.RestartNATS(b.Down)
		return time.Now(), err
	case RestartMongo:
		err := h.stack.RestartMongo(b.Down)
		return time.Now(), err
	default:
		h.killChild()
		return h.startChild(ctx)
	}
}

// settleBatch waits until every session has a notification and the
// consumer has acked everything, and returns the notifications. It gives up
// when no new notification arrived for stallTimeout, so a slow (loaded)
// machine is not mistaken for a loss.
func (h *Harness) settleBatch(ctx context.Context, all []session, from uint64) ([]testkit.Notification, error) {
	var notes []testkit.Notification
	lastCount, lastProgress := -1, time.Now()
	err := testkit.Poll(ctx, 100*time.Millisecond, "every session of the batch to settle", func(ctx context.Context) bool {
		ns, err := testkit.ScanNotifications(ctx, h.stack.js, transcriptionStream, from)
		if err != nil {
			return false
		}
		notes = ns
		if len(ns) != lastCount {
			lastCount, lastProgress = len(ns), time.Now()
		}
		if time.Since(lastProgress) > stallTimeout {
			return true // given up; the counts show what is missing
		}
		info, err := consumerInfo(ctx, h.stack.js)
		return err == nil && settled(info) && missing(all, ns) == 0
	})
	if err == nil && missing(all, notes) > 0 {
		err = fmt.Errorf("no new notification for %s with %d sessions unannounced", stallTimeout, missing(all, notes))
	}
	return notes, err
}

// missing counts the sessions without a notification in ns.
func missing(all []session, ns []testkit.Notification) int {
	seen := map[string]bool{}
	for _, n := range ns {
		seen[n.Key] = true
	}
	left := 0
	for _, s := range all {
		if !seen[s.key()] {
			left++
		}
	}
	return left
}

func (h *Harness) batchResults(ctx context.Context, all []session, notes []testkit.Notification) ([]Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	sums, err := testkit.SummaryCounts(ctx, h.stack.DB(h.db))
	if err != nil {
		return nil, fmt.Errorf("counting summaries: %w", err)
	}
	perKey := map[string]int{}
	for _, n := range notes {
		perKey[n.Key]++
	}
	res := make([]Result, len(all))
	for i, s := range all {
		res[i] = Result{Summaries: sums[s.key()], Notifications: perKey[s.key()]}
	}
	return res, nil
}

// batchRecoveries is, for each disruption, the time from the restart to
// the first notification stored after it, for any session.
func batchRecoveries(notes []testkit.Notification, restarts []time.Time) []time.Duration {
	var out []time.Duration
	for _, r := range restarts {
		first := time.Duration(-1)
		for _, n := range notes {
			if d := n.Stored.Sub(r); d >= 0 && (first < 0 || d < first) {
				first = d
			}
		}
		if first >= 0 {
			out = append(out, first)
		}
	}
	return out
}

// batchNote is the evidence beyond the counts: how often handlers failed and
// were Nak'd, and whether anything was dead-lettered.
func (h *Harness) batchNote(ctx context.Context, dlFrom uint64) (string, uint64) {
	dl, dead := "?", uint64(0)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if next, err := nextSeq(ctx, h.stack.js, deadLetterStream); err == nil {
		dead = next - dlFrom
		dl = fmt.Sprint(dead)
	}
	raw, _ := os.ReadFile(h.logPath)
	log := string(raw)
	return fmt.Sprintf("handler failures Nak'd %d, NATS disconnects %d, dead letters %s",
		strings.Count(log, "will retry"), strings.Count(log, "disconnected from NATS"), dl), dead
}
