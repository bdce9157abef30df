// Package rewind moves a function's durable consumer back (or forward) to
// a stream sequence or time without deleting it, for `jetfn rewind`: the
// server's consumer reset (nats-server 2.14, `$JS.API.CONSUMER.RESET`)
// makes it deliver from there next, and forgets what it had delivered and
// not yet acknowledged. Plan says first what that means: how many messages
// are handled again, and how many of those were stored longer ago than the
// outputs' duplicate window, so that their outputs, published with the
// same IDs, are no longer recognised as duplicates and are stored again.
package rewind

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// Plan is what a rewind of one function does.
type Plan struct {
	Function, Stream, Consumer string
	// To is the stream sequence the consumer delivers next after it.
	To uint64
	// Ahead is how many matching messages the consumer has not yet
	// settled now (pending plus acknowledgement pending); From how many it
	// will have from To on.
	Ahead, From uint64
	// Window is the shortest duplicate window of the function's output
	// streams (0: no outputs); Outside how many of the messages handled
	// again were stored before now minus Window.
	Window  time.Duration
	Outside uint64
}

// Again is how many messages the function handles again (a rewind back).
func (p Plan) Again() uint64 { return p.From - min(p.From, p.Ahead) }

// Skipped is how many messages not yet settled it never handles (a rewind
// forward).
func (p Plan) Skipped() uint64 { return p.Ahead - min(p.Ahead, p.From) }

// ErrKeyed is a rewind of a keyed function: its keyed stream deletes what
// was handled, so there is nothing to go back to.
var ErrKeyed = errors.New("a keyed function cannot be rewound: its keyed stream deletes each message once it is handled")

// ErrDebounced is a rewind of a debounced function: each input's receipt,
// kept for the debounce window, makes an input read again a duplicate, so
// a rewind would run the inputs older than the window again and not the
// newer ones.
var ErrDebounced = errors.New("a debounced function cannot be rewound: its inputs' receipts make those of the last debounce window duplicates, " +
	"so only the older ones would run again")

// ErrBeforeStart is a rewind to before where the consumer was configured
// to start (the manifest's start:, or the position a recreated consumer
// resumed from): the server's reset refuses it, and a consumer that
// delivers only new messages cannot be reset at all.
var ErrBeforeStart = errors.New("the server cannot rewind a consumer to before where it was configured to start")

// Target is where to rewind to: a stream sequence, or the first message
// stored at or after a time.
type Target struct {
	Seq  uint64
	Time time.Time
}

// MakePlan says what rewinding f to target would do now.
func MakePlan(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest, f manifest.FunctionSpec, target Target, now time.Time) (Plan, error) {
	p := Plan{Function: f.Name, Stream: f.Stream, Consumer: f.Durable}
	if f.IsKeyed() {
		return p, ErrKeyed
	}
	if f.IsDebounced() {
		return p, ErrDebounced
	}
	s, err := js.Stream(ctx, f.Stream)
	if err != nil {
		return p, fmt.Errorf("looking up stream %s: %w", f.Stream, err)
	}
	c, err := s.Consumer(ctx, f.Durable)
	if err != nil {
		return p, fmt.Errorf("looking up consumer %s on %s: %w", f.Durable, f.Stream, err)
	}
	info := c.CachedInfo()
	p.Ahead = info.NumPending + uint64(info.NumAckPending)
	counter := pendingCounter{s: s, filters: f.FilterSubjects()}
	if p.To, err = counter.seqOf(ctx, target); err != nil {
		return p, err
	}
	if err := counter.checkStart(ctx, info.Config, p.To); err != nil {
		return p, fmt.Errorf("rewinding %s to stream sequence %d: %w", f.Name, p.To, err)
	}
	if p.From, err = counter.from(ctx, jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: p.To}); err != nil {
		return p, err
	}
	if p.Window, err = outputWindow(ctx, js, f); err != nil || p.Window == 0 {
		return p, err
	}
	cutoff := now.Add(-p.Window)
	recent, err := counter.from(ctx, jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &cutoff})
	if err != nil {
		return p, err
	}
	p.Outside = min(p.Again(), p.From-min(p.From, recent))
	return p, nil
}

// Apply rewinds the consumer as p says.
func Apply(ctx context.Context, js jetstream.JetStream, p Plan) error {
	if _, err := js.ResetConsumerToSequence(ctx, p.Stream, p.Consumer, p.To); err != nil {
		return fmt.Errorf("resetting consumer %s on %s to stream sequence %d: %w", p.Consumer, p.Stream, p.To, err)
	}
	return nil
}

// outputWindow is the shortest duplicate window among f's output streams,
// as the server has them.
func outputWindow(ctx context.Context, js jetstream.JetStream, f manifest.FunctionSpec) (time.Duration, error) {
	var window time.Duration
	for _, o := range f.Outputs {
		s, err := js.Stream(ctx, o.Stream)
		if err != nil {
			return 0, fmt.Errorf("looking up output stream %s: %w", o.Stream, err)
		}
		if d := s.CachedInfo().Config.Duplicates; window == 0 || d < window {
			window = d
		}
	}
	return window, nil
}

// pendingCounter counts a function's matching messages with short-lived
// ephemeral consumers, which change nothing the function sees.
type pendingCounter struct {
	s       jetstream.Stream
	filters []string
}

// ephemeral is a consumer with the function's filter and start cfg.
func (pc pendingCounter) ephemeral(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, func(), error) {
	cfg.FilterSubjects, cfg.AckPolicy, cfg.InactiveThreshold = pc.filters, jetstream.AckNonePolicy, 10*time.Second
	cfg.Description = "jetfn rewind: counting messages"
	c, err := pc.s.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("counting messages on %s: %w", pc.s.CachedInfo().Config.Name, err)
	}
	return c, func() { _ = pc.s.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name) }, nil
}

// from is how many matching messages a consumer starting as cfg says
// would deliver.
func (pc pendingCounter) from(ctx context.Context, cfg jetstream.ConsumerConfig) (uint64, error) {
	c, done, err := pc.ephemeral(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer done()
	return c.CachedInfo().NumPending, nil
}

// checkStart refuses a rewind to before where a consumer configured as
// cfg starts, as the server's reset would (nats-server consumer.go
// resetStartingSeqLocked), but before anything is confirmed.
func (pc pendingCounter) checkStart(ctx context.Context, cfg jetstream.ConsumerConfig, to uint64) error {
	var start uint64
	switch cfg.DeliverPolicy {
	case jetstream.DeliverAllPolicy:
		return nil
	case jetstream.DeliverByStartSequencePolicy:
		start = cfg.OptStartSeq
	case jetstream.DeliverByStartTimePolicy:
		var err error
		if start, err = pc.seqOf(ctx, Target{Time: *cfg.OptStartTime}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: its consumer delivers only %s (deliver policy %s), and the server resets such a consumer nowhere",
			ErrBeforeStart, deliversOnly(cfg.DeliverPolicy), cfg.DeliverPolicy)
	}
	if to < start {
		return fmt.Errorf("%w: its consumer starts at stream sequence %d", ErrBeforeStart, start)
	}
	return nil
}

// deliversOnly says what a consumer that cannot be reset delivers.
func deliversOnly(p jetstream.DeliverPolicy) string {
	if p == jetstream.DeliverNewPolicy {
		return "new messages"
	}
	return "the last messages"
}

// seqOf is target's stream sequence: the first matching message stored at
// or after its time (past the last one when there is none).
func (pc pendingCounter) seqOf(ctx context.Context, target Target) (uint64, error) {
	if target.Time.IsZero() {
		if target.Seq == 0 {
			return 0, errors.New("rewind to stream sequence 0: sequences start at 1")
		}
		return target.Seq, nil
	}
	c, done, err := pc.ephemeral(ctx, jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &target.Time})
	if err != nil {
		return 0, err
	}
	defer done()
	if c.CachedInfo().NumPending == 0 {
		return pc.s.CachedInfo().State.LastSeq + 1, nil
	}
	msg, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		return 0, fmt.Errorf("finding the first message stored at %s: %w", target.Time.Format(time.RFC3339), err)
	}
	meta, err := msg.Metadata()
	if err != nil {
		return 0, err
	}
	return meta.Sequence.Stream, nil
}
