package crash

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
	"github.com/nats-io/nats.go/jetstream"
)

// segmentsPerSession is how many segments each seeded session has.
const segmentsPerSession = 6

// Result is what one run, or one session of a batch, ended with.
type Result struct {
	Summaries, Notifications int
	// Recovery is from the restart to the first transcript.processed stored
	// after it; when none is stored after it (the duplicate was dropped, as
	// it should be), to the ack. In max-deliveries-all-down, from the final
	// restart to the dead letter. Zero when nothing was restarted.
	Recovery time.Duration
	// DeadLetters counts the run's dead letters, and BadDeadLetter says how
	// they differ from the original; only max-deliveries-all-down looks.
	DeadLetters   int
	BadDeadLetter []string
	// Err is a run that could not be judged: a kill that missed its point,
	// a session that never settled.
	Err error
}

// RunPoint runs p runs times and returns its row.
func (h *Harness) RunPoint(ctx context.Context, p Point, runs int) Row {
	row := Row{Point: p.Name, WantSummaries: 1, WantNotifications: p.WantNotifications}
	return h.repeat(ctx, row, runs, func() Result { return h.runOnce(ctx, p) })
}

// repeat adds runs results of once to row, logging each, and stops early
// when ctx is done.
func (h *Harness) repeat(ctx context.Context, row Row, runs int, once func() Result) Row {
	for i := range runs {
		start := time.Now()
		res := once()
		h.opts.Log.Info("run", "point", row.Point, "run", i+1, "summaries", res.Summaries,
			"notifications", res.Notifications, "recovery", res.Recovery, "err", res.Err,
			"took", time.Since(start).Round(time.Millisecond))
		row.add(res)
		if ctx.Err() != nil {
			break
		}
	}
	return row
}

// runTimeout bounds one run: start-up, the handler, a redelivery after
// ackWait, the outage, and slack for a loaded machine.
func runTimeout(p Point, quiet time.Duration) time.Duration {
	return 60*time.Second + p.Outage + 2*ackWait + time.Duration(maxRounds)*quiet
}

func (h *Harness) runOnce(ctx context.Context, p Point) Result {
	ctx, cancel := context.WithTimeout(ctx, runTimeout(p, h.opts.Quiet))
	defer cancel()
	res, err := h.runSession(ctx, p)
	res.Err = h.stopChildAfter(err)
	return res
}

func (h *Harness) runSession(ctx context.Context, p Point) (Result, error) {
	if err := h.prepare(p.Name, p.Window); err != nil {
		return Result{}, err
	}
	if err := h.freshStreamIfShrinking(ctx, p.Window); err != nil {
		return Result{}, err
	}
	if _, err := h.startChild(ctx); err != nil {
		return Result{}, err
	}
	s := session{conversationID: fmt.Sprintf("conv-%03d", h.runs),
		sessionID: fmt.Sprintf("sess-%03d-%d", h.runs, time.Now().UnixNano()), segments: segmentsPerSession}
	db := h.stack.DB(h.db)
	if err := seed(ctx, db, s); err != nil {
		return Result{}, err
	}
	from, err := nextSeq(ctx, h.stack.js, transcriptionStream)
	if err != nil {
		return Result{}, err
	}
	if p.arm != nil {
		p.arm(h.proxy)
	}
	if err := publishEnded(ctx, h.stack.js, s); err != nil {
		return Result{}, err
	}
	var restart time.Time
	if p.await != nil {
		if restart, err = h.killAndRestart(ctx, p, s, from); err != nil {
			return Result{}, err
		}
	}
	return h.settle(ctx, s, from, restart)
}

// freshStreamIfShrinking deletes the TRANSCRIPTION stream (and with it the
// consumer) when it holds a longer duplicate window than the next run
// wants; the child then creates it with the short window.
//
// Shrinking the window in place is not reliable on nats-server v2.15.2: the
// update resets the dedupe purge timer to 1µs before it stores the new
// window, and when the timer wins that race the purge reschedules itself
// with the old window (24h), so message IDs outlive the new one. Seen in 1
// of 30 tries in isolation and in 2 of 2 short-window runs of the -race
// test; it errs towards fewer duplicates, so jetfn is not hurt by it.
func (h *Harness) freshStreamIfShrinking(ctx context.Context, window time.Duration) error {
	var s jetstream.Stream
	err := testkit.Retry(ctx, readWithin, "reading stream "+transcriptionStream, func(ctx context.Context) error {
		var err error
		s, err = h.stack.js.Stream(ctx, transcriptionStream)
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.CachedInfo().Config.Duplicates <= window {
		return nil
	}
	if err := h.stack.js.DeleteStream(ctx, transcriptionStream); err != nil {
		return fmt.Errorf("deleting %s before a shorter window: %w", transcriptionStream, err)
	}
	return nil
}

// killAndRestart waits for the kill moment, kills the child, checks that it
// died where the point says, keeps it down for the outage and restarts it.
func (h *Harness) killAndRestart(ctx context.Context, p Point, s session, from uint64) (time.Time, error) {
	if err := p.await(ctx, h, s); err != nil {
		return time.Time{}, err
	}
	h.killChild()
	sum, notes, err := h.count(ctx, s, from)
	if err != nil {
		return time.Time{}, err
	}
	if [2]int{sum, notes} != p.before {
		return time.Time{}, fmt.Errorf("kill missed its point: %d summaries and %d notifications stored at the kill, want %d and %d",
			sum, notes, p.before[0], p.before[1])
	}
	if err := h.outage(p); err != nil {
		return time.Time{}, err
	}
	return h.startChild(ctx)
}

// outage keeps the child down for p.Outage, restarting nats-server inside
// it when the point says so. The sleep is the outage itself, the point of
// these runs, not a wait for an effect.
func (h *Harness) outage(p Point) error {
	start := time.Now()
	if p.NATSDown > 0 {
		if err := h.stack.RestartNATS(p.NATSDown); err != nil {
			return err
		}
	}
	time.Sleep(p.Outage - time.Since(start))
	return nil
}

// count reads the session's summaries and notifications as stored now.
func (h *Harness) count(ctx context.Context, s session, from uint64) (int, int, error) {
	sum, err := summaries(ctx, h.stack.DB(h.db), s)
	if err != nil {
		return 0, 0, fmt.Errorf("counting summaries: %w", err)
	}
	var ns []testkit.Notification
	err = testkit.Retry(ctx, readWithin, "counting notifications", func(ctx context.Context) error {
		var err error
		ns, err = testkit.ScanNotifications(ctx, h.stack.js, transcriptionStream, from)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("counting notifications: %w", err)
	}
	return sum, len(forKey(ns, s.key())), nil
}

func forKey(ns []testkit.Notification, key string) []testkit.Notification {
	var out []testkit.Notification
	for _, n := range ns {
		if n.Key == key {
			out = append(out, n)
		}
	}
	return out
}

// settle waits until the session has a notification and the consumer has
// acked everything (after the restart, if there was one), then counts.
func (h *Harness) settle(ctx context.Context, s session, from uint64, restart time.Time) (Result, error) {
	var ackedAt time.Time
	var notes []testkit.Notification
	err := testkit.Poll(ctx, 20*time.Millisecond, "session "+s.key()+" to settle", func(ctx context.Context) bool {
		info, err := consumerInfo(ctx, h.stack.js)
		if err != nil || !settled(info) || info.AckFloor.Last == nil || info.AckFloor.Last.Before(restart) {
			return false
		}
		ns, err := testkit.ScanNotifications(ctx, h.stack.js, transcriptionStream, from)
		if err != nil {
			return false
		}
		notes, ackedAt = forKey(ns, s.key()), *info.AckFloor.Last
		return len(notes) > 0
	})
	if err != nil {
		return h.partial(s, from), err
	}
	sum, err := summaries(ctx, h.stack.DB(h.db), s)
	if err != nil {
		return Result{}, fmt.Errorf("counting summaries: %w", err)
	}
	return Result{Summaries: sum, Notifications: len(notes), Recovery: recovery(notes, restart, ackedAt)}, nil
}

// partial counts what is there for a run that never settled, so the table
// still shows a lost session as zero.
func (h *Harness) partial(s session, from uint64) Result {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sum, notes, _ := h.count(ctx, s, from)
	return Result{Summaries: sum, Notifications: notes}
}

// recovery is the time from restart to the first notification stored after
// it, or to the ack when none was.
func recovery(notes []testkit.Notification, restart, ackedAt time.Time) time.Duration {
	if restart.IsZero() {
		return 0
	}
	for _, n := range notes {
		if !n.Stored.Before(restart) {
			return n.Stored.Sub(restart)
		}
	}
	return ackedAt.Sub(restart)
}
