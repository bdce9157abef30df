package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// A backfill consumer (filterchange.go) is bound beside the function's
// main consumer by every instance, as a second binding that shares the
// function's handler and counters; the instance that sees it done removes
// it. Nothing here runs without provisioning: creating and removing
// consumers is provisioning's right.

// backfillCheckEvery is how often a running backfill asks whether it is
// done.
const backfillCheckEvery = time.Second

// prepareFilterChange makes the backfill consumer a change of the main
// consumer's filter (from existing's to want's) needs before the change is
// made, and writes the notes and the backfill's name into want's metadata.
// An unfinished backfill is folded into the new one, and what the
// function's lineage handled under another durable is left out of it.
func prepareFilterChange(ctx context.Context, stream jetstream.Stream, existing jetstream.Consumer, f manifest.FunctionSpec,
	digest string, want *jetstream.ConsumerConfig, positions *positionStore) error {
	info := existing.CachedInfo()
	have := filtersOf(info.Config)
	change := diffFilters(have, filtersOf(*want))
	old, oldFloor, running, err := readRunningBackfill(ctx, stream, info.Config, info.Delivered.Stream)
	if err != nil {
		return err
	}
	oldName := info.Config.Metadata[backfillKey]
	if change.empty() && !running {
		return nil
	}
	start, err := startSeq(ctx, stream, f)
	if err != nil {
		return err
	}
	// A dropped subject is noted as handled through the ack floor, not
	// the last delivery: a message delivered and not acknowledged (a
	// retry waiting) is forgotten by a reset under the new filter, and a
	// later widening must hand it over (opscheck seed 20261222).
	plan := planFilterChange(change, have, want.Metadata, info.AckFloor.Stream, start)
	if running {
		plan = foldBackfill(plan, old, oldFloor, filtersOf(*want), have, want.Metadata)
	}
	if ahead, ok := furtherUnderAnotherDurable(ctx, stream, f, scopeOf(info.Config, f), positions); ok {
		plan = plan.after(ahead, info.Delivered.Stream)
	}
	delete(want.Metadata, backfillKey)
	if oldName != "" {
		if err := deleteConsumer(ctx, stream, oldName); err != nil {
			return err
		}
	}
	if plan == nil {
		return nil
	}
	return startBackfill(ctx, stream, plan, backfillName(f.Durable, oldName), f, digest, want)
}

// startBackfill creates the backfill consumer named name that plan
// describes and names it in want, the main consumer's config.
func startBackfill(ctx context.Context, stream jetstream.Stream, plan *backfillPlan, name string, f manifest.FunctionSpec, digest string,
	want *jetstream.ConsumerConfig) error {
	cfg, err := plan.config(name, f, digest)
	if err != nil {
		return err
	}
	if _, err := stream.CreateOrUpdateConsumer(ctx, cfg); err != nil {
		return fmt.Errorf("%w: creating backfill consumer %s: %v", ErrServerRefused, cfg.Durable, err)
	}
	want.Metadata[backfillKey] = cfg.Durable
	return nil
}

// readRunningBackfill reads the backfill the main consumer config names:
// its range (through defaulting to delivered, the main consumer's
// position, when it was never bound) and its ack floor.
func readRunningBackfill(ctx context.Context, stream jetstream.Stream, main jetstream.ConsumerConfig, delivered uint64) (backfillRange, uint64, bool, error) {
	name := main.Metadata[backfillKey]
	if name == "" {
		return backfillRange{}, 0, false, nil
	}
	c, err := stream.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return backfillRange{}, 0, false, nil
	}
	if err != nil {
		return backfillRange{}, 0, false, fmt.Errorf("looking up backfill consumer %s: %w", name, err)
	}
	info := c.CachedInfo()
	r, err := readBackfillRange(info.Config.Metadata)
	if err != nil {
		return backfillRange{}, 0, false, fmt.Errorf("backfill consumer %s: %w", name, err)
	}
	if info.Config.Metadata[backfillThroughKey] == "" {
		r.through = delivered // never fixed: 0 is a real end (an ack floor of 0)
	}
	return r, info.AckFloor.Stream, true, nil
}

func deleteConsumer(ctx context.Context, stream jetstream.Stream, name string) error {
	err := stream.DeleteConsumer(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("deleting consumer %s: %w", name, err)
	}
	return nil
}

// after moves each subject's start past what the function handled under
// another durable that read it (a rename this consumer returns from, with
// fewer subjects than it reads now): below that durable's ack floor every
// message of its subjects had its effects. A subject left with nothing
// before delivered, where the main consumer takes over, is dropped, and
// with it a plan that has no subject left.
func (p *backfillPlan) after(ahead aheadPosition, delivered uint64) *backfillPlan {
	if p == nil {
		return nil
	}
	for s, from := range p.from {
		if !coversAll(ahead.filter, []string{s}) {
			continue
		}
		if from = max(from, ahead.floor+1); from > delivered {
			delete(p.from, s)
		} else {
			p.from[s] = from
		}
	}
	if len(p.from) == 0 {
		return nil
	}
	return p
}

// startSeq is the first sequence of a subject the function never read, as
// its start says: 1 for all, 0 (none) for new, and for a time the first
// sequence stored at or after it.
func startSeq(ctx context.Context, stream jetstream.Stream, f manifest.FunctionSpec) (uint64, error) {
	at, isTime := f.StartTime()
	switch {
	case isTime:
		return seqAtTime(ctx, stream, at)
	case f.Start == manifest.StartNew:
		return 0, nil
	}
	return 1, nil
}

// seqAtTime is the first sequence stored at or after t: where a consumer
// started at t begins, read from a short-lived one.
func seqAtTime(ctx context.Context, stream jetstream.Stream, t time.Time) (uint64, error) {
	c, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t, InactiveThreshold: 10 * time.Second,
		Description: "jetfn: the first sequence stored at a start time"})
	if err != nil {
		return 0, fmt.Errorf("finding the first message stored at %s: %w", t.Format(time.RFC3339), err)
	}
	defer func() { _ = stream.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name) }()
	return c.CachedInfo().Delivered.Stream + 1, nil
}

// bindBackfill prepares the binding of the backfill the main consumer
// names, or returns nil when there is none (or it is gone). A backfill
// bound for the first time learns where it ends: the main consumer's
// position now, after the change.
func (r *Runtime) bindBackfill(ctx context.Context, b *binding, stream jetstream.Stream, m *manifest.Manifest) (*binding, error) {
	main := b.consumer.get()
	name := main.CachedInfo().Config.Metadata[backfillKey]
	if name == "" || r.opts.noProvision {
		return nil, nil
	}
	c, err := stream.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil // another instance finished it
	}
	if err != nil {
		return nil, fmt.Errorf("looking up backfill consumer %s: %w", name, err)
	}
	if c, err = settleThrough(ctx, stream, main.CachedInfo().Name, c); err != nil {
		return nil, err
	}
	rng, err := readBackfillRange(c.CachedInfo().Config.Metadata)
	if err != nil {
		return nil, fmt.Errorf("backfill consumer %s: %w", name, err)
	}
	bf := b.backfillBinding(c, rng)
	streamSpec, _ := m.Stream(b.spec.Stream)
	bf.consumer = newConsumerHandle(r.js, bf.spec, streamSpec, m.Digest, false, bf.log, c, stream.CachedInfo().Created, nil)
	bf.consumer.quiet = true
	b.log.Info("handing over what a subject filter change passed over", "backfill_consumer", name,
		"subjects", bf.spec.FilterSubjects(), "through_stream_seq", rng.through, "pending", c.CachedInfo().NumPending)
	return bf, nil
}

// settleThrough fixes where a backfill ends, unless that is fixed already.
// The server does not say how far a consumer has scanned: while its filter
// still lacked the added subjects, a waiting pull moved it past their
// messages without delivering them, and its delivered sequence does not
// show that. So the main consumer (named main) is reset to just after its
// ack floor (which keeps every unacknowledged message: nothing is
// dropped), and delivers from there whatever its new filter matches; the
// backfill ends at the floor. Messages above the floor that were delivered
// already come once more: recent ones, inside the duplicate window.
//
// The change itself does this, with the main consumer paused
// (changeFilterHeld); a binding does it only for a backfill whose change
// did not get that far (its instance died in between).
func settleThrough(ctx context.Context, stream jetstream.Stream, main string, c jetstream.Consumer) (jetstream.Consumer, error) {
	cfg := c.CachedInfo().Config
	if cfg.Metadata[backfillThroughKey] != "" {
		return c, nil
	}
	reset, err := stream.ResetConsumerToSequence(ctx, main, 0)
	if err != nil {
		return nil, fmt.Errorf("resetting consumer %s to its ack floor for its backfill: %w", main, err)
	}
	cfg.Metadata = maps.Clone(cfg.Metadata)
	cfg.Metadata[backfillThroughKey] = strconv.FormatUint(reset.ResetSeq-1, 10)
	c, err = stream.UpdateConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("recording where backfill consumer %s ends: %w", cfg.Durable, err)
	}
	return c, nil
}

// backfillBinding is a binding of the backfill consumer c: b's function,
// handler and counters, c's filter, and only rng's messages handled.
func (b *binding) backfillBinding(c jetstream.Consumer, rng backfillRange) *binding {
	cfg := c.CachedInfo().Config
	spec := b.spec
	spec.Durable, spec.Subject, spec.Subjects = cfg.Durable, "", filtersOf(cfg)
	bf := b.sibling(spec, b.log.With("backfill_consumer", spec.Durable))
	bf.backfill, bf.main = &rng, b
	return bf
}

// sibling is a binding of another consumer for b's function (spec says
// which): it shares b's handler, counters, run history, ID scope, rate
// limiter and lease, and starts with b's heartbeat.
func (b *binding) sibling(spec manifest.FunctionSpec, log *slog.Logger) *binding {
	s := &binding{spec: spec, handler: b.handler, js: b.js, dlSubject: b.dlSubject,
		ackPrefix: ackPrefix(spec.Stream, spec.Durable), stats: b.stats, log: log,
		bufferBeats: b.bufferBeats, observe: b.observe, refusal: b.refusal, deployed: b.deployed, remote: b.remote,
		trace: b.trace, runs: b.runs, scope: b.scope, attempts: b.attempts, rate: b.rate, keyRate: b.keyRate, lease: b.lease, gate: b.gate}
	s.heartbeat.Store(b.heartbeat.Load())
	return s
}

// runBackfill runs the backfill binding until it is done (then removes it)
// or ctx ends, and waits for its drain.
func (b *binding) runBackfill(ctx context.Context, drainTimeout time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.run(ctx, drainTimeout)
	}()
	everyOrKicked(ctx, backfillCheckEvery, nil, func(ctx context.Context) {
		if b.backfillDone(ctx) {
			cancel()
		}
	})
	<-done
}

// backfillDone reports whether the backfill has handed over everything up
// to its end (then it removes it) or is gone.
func (b *binding) backfillDone(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, consumerInfoTimeout)
	defer cancel()
	info, err := b.consumer.get().Info(ctx)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return true
	}
	if err != nil || info.NumAckPending > 0 || info.Delivered.Stream < b.backfill.through && info.NumPending > 0 {
		return false
	}
	if err := b.finishBackfill(ctx); err != nil {
		b.log.Warn("removing a finished backfill consumer; the next look tries again", "err", err)
		return false
	}
	b.log.Info("backfill done: everything a subject filter change passed over is handed over",
		"through_stream_seq", b.backfill.through)
	return true
}

// finishBackfill deletes the backfill, then takes its name off the main
// consumer, so no instance binds it again. In that order: a deploy that
// reads the name meanwhile gives its own backfill the other name. Taken
// off first, the name was free again, a deploy reused it, and this
// deleted the deploy's new backfill (TestNarrowedWhileAMessageWaitsForItsRetry
// saw it, once a change looked its backfill up).
func (b *binding) finishBackfill(ctx context.Context) error {
	s, err := b.js.Stream(ctx, b.spec.Stream)
	if err != nil {
		return err
	}
	if err := deleteConsumer(ctx, s, b.spec.Durable); err != nil {
		return err
	}
	main, err := s.Consumer(ctx, b.main.spec.Durable)
	if err != nil {
		return err
	}
	cfg := main.CachedInfo().Config
	if cfg.Metadata[backfillKey] != b.spec.Durable {
		return nil
	}
	cfg.Metadata = maps.Clone(cfg.Metadata)
	delete(cfg.Metadata, backfillKey)
	_, err = s.UpdateConsumer(ctx, cfg)
	return err
}

// filterChangeHold bounds how long a filter change keeps the main consumer
// paused. The change lifts the pause itself once the backfill's end is
// fixed, within milliseconds; the bound matters only if the instance dies
// in between.
const filterChangeHold = 30 * time.Second

// changeFilterHeld makes a filter change that starts a backfill (want, the
// main consumer's new config, names it) and fixes where that backfill
// ends, with the main consumer paused from before the change until the end
// is fixed, so it delivers nothing under its new filter before
// settleThrough resets it. Without the pause an instance still pulling
// took messages of the added subjects in between; once acked they fell
// below the end, and the backfill handed them again. The pause is the
// server's pause request: nats-server v2.15.2 ignores PauseUntil in a
// config update, and keeps a paused consumer paused through one. A pause
// an operator set is put back. A user without the right to pause (the
// runtime's own permissions may lack it) changes the filter unpaused, as
// before, with the window that leaves.
func changeFilterHeld(ctx context.Context, stream jetstream.Stream, want jetstream.ConsumerConfig, log *slog.Logger) (jetstream.Consumer, error) {
	operatorPause := want.PauseUntil
	paused := false
	if hold := time.Now().Add(filterChangeHold); operatorPause == nil || operatorPause.Before(hold) {
		_, err := stream.PauseConsumer(ctx, want.Durable, hold)
		paused = err == nil
		if err != nil && log != nil {
			log.Warn("changing the subject filter without pausing the consumer; what it delivers meanwhile may be handed over again",
				"consumer", want.Durable, "err", err)
		}
	}
	if _, err := stream.CreateOrUpdateConsumer(ctx, want); err != nil {
		return nil, err
	}
	name := want.Metadata[backfillKey]
	bf, err := stream.Consumer(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("looking up backfill consumer %s: %w", name, err)
	}
	if _, err := settleThrough(ctx, stream, want.Durable, bf); err != nil {
		return nil, err
	}
	if paused {
		if err := unpause(ctx, stream, want.Durable, operatorPause); err != nil {
			return nil, fmt.Errorf("ending the pause of consumer %s after its filter change: %w", want.Durable, err)
		}
	}
	return stream.Consumer(ctx, want.Durable)
}

// unpause ends the pause a filter change set: back to the operator's
// pause when one runs past now, else resumed.
func unpause(ctx context.Context, stream jetstream.Stream, name string, operatorPause *time.Time) error {
	if operatorPause != nil && operatorPause.After(time.Now()) {
		_, err := stream.PauseConsumer(ctx, name, *operatorPause)
		return err
	}
	_, err := stream.ResumeConsumer(ctx, name)
	return err
}

// startsBackfill reports whether want, an existing consumer's new config,
// names a backfill the consumer does not name yet: a change that starts
// one.
func startsBackfill(existing jetstream.Consumer, want jetstream.ConsumerConfig) bool {
	name := want.Metadata[backfillKey]
	return name != "" && existing != nil && name != existing.CachedInfo().Config.Metadata[backfillKey]
}
