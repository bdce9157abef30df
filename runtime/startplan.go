package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// StartPlan says where a function's durable consumer is, or where jetfn
// would start it if it created it now, and how many stored messages that
// leaves the function to handle: `jetfn check --server` shows it before a
// deploy, so no consumer starts over stored history unannounced.
type StartPlan struct {
	Function string
	Consumer string
	Stream   string
	// StreamMissing: the stream does not exist yet; jetfn will create it
	// empty.
	StreamMissing bool
	// Exists: the consumer is on the server, and has delivered up to
	// stream sequence Delivered.
	Exists    bool
	Delivered uint64
	// Start is why a consumer created now starts where it does.
	Start string
	// Pending is how many stored messages the consumer has, or would have,
	// to handle.
	Pending uint64
	// KeyedStream is a keyed function's keyed stream, whose partition
	// consumers it reads instead of a consumer on Stream. Exists says
	// whether the stream does, Partitions how many partitions its keys
	// are hashed to (the server's, or the manifest's for a new one), and
	// Pending how many messages it holds not yet handled.
	KeyedStream string
	Partitions  int
	// AddedSubjects are the subjects the manifest adds to a subject-token
	// keyed function's existing keyed stream: what the input already
	// stored on them may never be handled (subjectsAddedToSource).
	AddedSubjects []string
}

// PlanStarts is every function's StartPlan on the server js reaches. It
// changes nothing, except that counting what a missing consumer would be
// given creates an ephemeral consumer with the same start and filter and
// deletes it.
func PlanStarts(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest) ([]StartPlan, error) {
	positions := openPositions(ctx, js, m, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	out := make([]StartPlan, 0, len(m.Functions))
	for _, f := range m.Functions {
		plan := planStart
		if f.IsKeyed() {
			plan = planKeyed
		}
		if f.IsDebounced() {
			f.Durable = f.DebouncerDurable() // its consumer reads the input, from where the function starts
		}
		p, err := plan(ctx, js, f, positions)
		if err == nil && f.IsKeyed() {
			p.AddedSubjects, err = subjectsAddedToSource(ctx, js, m.KeyedStream(f, time.Now()))
		}
		if err != nil {
			return nil, fmt.Errorf("function %s: %w", f.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func planStart(ctx context.Context, js jetstream.JetStream, f manifest.FunctionSpec, positions *positionStore) (StartPlan, error) {
	p := StartPlan{Function: f.Name, Consumer: f.Durable, Stream: f.Stream}
	s, err := js.Stream(ctx, f.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		p.StreamMissing, p.Start = true, "the stream is new: nothing stored yet"
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("looking up stream %s: %w", f.Stream, err)
	}
	if c, err := s.Consumer(ctx, f.Durable); err == nil {
		info := c.CachedInfo()
		p.Exists, p.Delivered, p.Pending = true, info.Delivered.Stream, info.NumPending
		return p, nil
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return p, fmt.Errorf("looking up consumer %s: %w", f.Durable, err)
	}
	keyed, wasKeyed, err := handledWhileKeyed(ctx, js, s, f)
	if err != nil {
		return p, err
	}
	var seen *knownFloor
	if wasKeyed {
		seen = keyed.known()
	}
	d, err := decideStart(ctx, s, f, positions, seen)
	if err != nil {
		return p, err
	}
	p.Start = d.why
	if unread := uncovered(f.FilterSubjects(), d.readFilter); d.readFilter != nil && len(unread) > 0 {
		p.Start += "; what " + strings.Join(unread, ", ") + " stored before is handed over as the manifest's start says (the durable read " +
			strings.Join(d.readFilter, ", ") + ")"
	}
	p.Pending, err = countFrom(ctx, s, f, d)
	return p, err
}

// planKeyed is a keyed function's plan: its keyed stream, and where a new
// one starts (the manifest's start:, applied once when jetfn makes it).
func planKeyed(ctx context.Context, js jetstream.JetStream, f manifest.FunctionSpec, _ *positionStore) (StartPlan, error) {
	p := StartPlan{Function: f.Name, Consumer: f.Durable, Stream: f.Stream, KeyedStream: f.KeyedStreamName(), Partitions: f.Partitions}
	s, err := js.Stream(ctx, p.KeyedStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		p.Start = "manifest start " + cmp.Or(f.Start, manifest.StartAll) + ", from the input stream " + f.Stream
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("looking up keyed stream %s: %w", p.KeyedStream, err)
	}
	p.Exists, p.Pending = true, s.CachedInfo().State.Msgs
	p.Partitions, err = partitionsOn(ctx, s, f)
	return p, err
}

// countFrom is how many stored messages a consumer with f's filter and
// start d would have to handle: the pending count of a short-lived
// ephemeral consumer made just for the question.
func countFrom(ctx context.Context, s jetstream.Stream, f manifest.FunctionSpec, d startDecision) (uint64, error) {
	if d.policy == jetstream.DeliverNewPolicy {
		return 0, nil
	}
	cfg := consumerConfig(f, "")
	cfg.Durable, cfg.Description, cfg.Metadata = "", "jetfn check: counting what a new consumer would handle", nil
	cfg.InactiveThreshold = 10 * time.Second
	d.apply(&cfg)
	c, err := s.CreateConsumer(ctx, cfg)
	if err != nil {
		return 0, fmt.Errorf("counting the stored messages a new consumer would handle: %w", err)
	}
	defer func() { _ = s.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name) }()
	return c.CachedInfo().NumPending, nil
}
