package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/test/testkit"
)

// Plan is what one run does.
type Plan struct {
	// Kinds are cycled through PerKind times.
	Kinds   []Kind
	PerKind int
	// Every is the publisher's interval between sessions; GiveUp how long
	// it retries one session-ended before its outcome stays unknown.
	Every, GiveUp time.Duration
	// Settle is how long the end of the run waits with no new
	// transcript.processed or recording notice before it counts what is
	// missing as lost.
	Settle time.Duration
	// Recordings is how many recordings the recording publisher plays
	// (nine events each; none if zero), a burst of a recording's events
	// every RecordingEvery, until the run's faults are over.
	Recordings     int
	RecordingEvery time.Duration
}

// Validate reports every problem of the plan.
func (p Plan) Validate() error {
	var errs []error
	if len(p.Kinds) == 0 || p.PerKind <= 0 {
		errs = append(errs, fmt.Errorf("plan: %d kinds × %d faults is no fault", len(p.Kinds), p.PerKind))
	}
	if p.Every <= 0 || p.GiveUp <= 0 || p.Settle <= 0 {
		errs = append(errs, fmt.Errorf("plan: every %s, give up %s, settle %s must all be positive", p.Every, p.GiveUp, p.Settle))
	}
	if p.Recordings < 0 || p.Recordings > 0 && p.RecordingEvery <= 0 {
		errs = append(errs, fmt.Errorf("plan: %d recordings every %s", p.Recordings, p.RecordingEvery))
	}
	return errors.Join(errs...)
}

// Run publishes sessions at a steady rate, and the events of the plan's
// recordings, while it injects the plan's faults one after the other, then
// stops publishing, lets the run settle and classifies every session and
// recording event. A fault that cannot be carried out (the
// cluster never healthy again) ends the run early: the report has what
// happened until then and err says why.
func (h *Harness) Run(ctx context.Context, plan Plan) (*Report, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	h.pub = &Publisher{JS: h.js, Every: plan.Every, GiveUp: plan.GiveUp}
	h.recPub = &RecordingPublisher{JS: h.js, Recordings: plan.Recordings, Every: plan.RecordingEvery, GiveUp: plan.GiveUp}
	pubCtx, stopPub := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.pub.Run(pubCtx) })
	wg.Go(func() { h.recPub.Run(pubCtx) })
	faults, runErr := h.injectAll(ctx, plan)
	if runErr == nil {
		runErr = h.waitSteady(ctx) // sessions after the last fault
	}
	stopPub()
	h.pubStopped = time.Now()
	wg.Wait()
	settleErr := h.settle(ctx, plan.Settle)
	rep, err := h.classify(ctx, faults)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	rep.Settled = settleErr == nil
	return rep, runErr
}

func (h *Harness) injectAll(ctx context.Context, plan Plan) ([]Fault, error) {
	var faults []Fault
	for round := range plan.PerKind {
		for _, k := range plan.Kinds {
			f, err := h.inject(ctx, k, round)
			if err != nil {
				return faults, fmt.Errorf("%s #%d: %w", k, round+1, err)
			}
			faults = append(faults, f)
			h.opts.Log.Info("fault over", "kind", k, "n", round+1, "victim", f.Victim, "took", f.Healthy.Sub(f.At).Round(10*time.Millisecond),
				"rejoined_after", f.Healthy.Sub(f.Restored).Round(10*time.Millisecond), "recovered_while_down", f.RecoveredDown)
		}
	}
	return faults, nil
}

// settle waits until the consumers have nothing pending or unacked and
// every acknowledged session and recording event has its notification, or
// until no new notification came for quiet: what is missing then is lost
// (or dead-lettered).
func (h *Harness) settle(ctx context.Context, quiet time.Duration) error {
	ackedEvents := uint64(h.recPub.ackedCount())
	acked := 0
	for _, p := range h.pub.Publications() {
		if !p.Acked.IsZero() {
			acked++
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	last, lastNotices, lastChange := uint64(0), uint64(0), time.Now()
	return testkit.Poll(ctx, time.Second, "the run to settle", func(ctx context.Context) bool {
		n, err := h.processedCount(ctx)
		if err != nil {
			return false
		}
		notices, err := h.noticeCount(ctx)
		if err != nil {
			return false
		}
		if n != last || notices != lastNotices {
			last, lastNotices, lastChange = n, notices, time.Now()
		}
		settled := h.consumerSettled(ctx) && h.recordingsSettled(ctx)
		return settled && (n >= uint64(acked) && notices >= ackedEvents || time.Since(lastChange) > quiet)
	})
}

// noticeCount is how many recording notices NOTIFICATIONS holds (nothing
// else publishes to it here).
func (h *Harness) noticeCount(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, noticeStream)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.Msgs, nil
}

// recordingsSettled reports whether publish-recording-event's router has
// copied every event (its consumer has nothing pending or unacked) and
// its keyed stream is empty (every copy handled and acknowledged).
func (h *Harness) recordingsSettled(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := h.js.Consumer(ctx, recordingStream, recordingFunction+"-router")
	if err != nil {
		return false
	}
	if info := c.CachedInfo(); info.NumPending != 0 || info.NumAckPending != 0 {
		return false
	}
	s, err := h.js.Stream(ctx, manifest.KeyedStreamPrefix+recordingFunction)
	return err == nil && s.CachedInfo().State.Msgs == 0
}

// processedCount is how many transcript.processed messages the stream
// holds.
func (h *Harness) processedCount(ctx context.Context) (uint64, error) {
	return testkit.SubjectCount(ctx, h.js, transcriptionStream, events.TranscriptProcessedSubject)
}

// consumerSettled reports whether summarize-session's consumer has
// nothing pending and nothing delivered without an ack.
func (h *Harness) consumerSettled(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := h.js.Consumer(ctx, transcriptionStream, functionName)
	if err != nil {
		return false
	}
	info := c.CachedInfo()
	return info.NumPending == 0 && info.NumAckPending == 0
}
