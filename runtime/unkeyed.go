package runtime

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// A deploy that takes `ordered:` (or `keyConcurrency:`) away from a
// function, a rollback of the deploy that added it most often, makes the
// function read its input through a plain consumer again. Its keyed
// stream is still there, with what the keyed function had not handled
// yet. Created from the manifest alone, that consumer started at the
// input's first message (every message handled again); left from before
// the function was keyed, it started where it had stopped then. Either
// way everything handled in order was handled again, outside any
// duplicate window. So the consumer starts, or is moved up to, just after
// what the keyed function handled: before the first copy still waiting in
// its keyed stream, else the last message copied (handledThrough), as a
// keyed function pruned and added back does (keyedresume.go).

// handledWhileKeyed is how far into input unkeyed function f got while it
// was keyed, as a position ahead of its consumer: known when f's keyed
// stream is still there and the keyed function read every subject f reads
// (what it did not read, nobody handled). ok is false otherwise.
func handledWhileKeyed(ctx context.Context, js jetstream.JetStream, input jetstream.Stream, f manifest.FunctionSpec) (aheadPosition, bool, error) {
	if f.IsKeyed() || f.IsDebounced() {
		return aheadPosition{}, false, nil
	}
	ks, err := js.Stream(ctx, f.KeyedStreamName())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return aheadPosition{}, false, nil
	}
	if err != nil {
		return aheadPosition{}, false, err
	}
	read, router, err := keyedReads(ctx, input, ks, f)
	if err != nil || !coversAll(read, f.FilterSubjects()) {
		return aheadPosition{}, false, err
	}
	floor, ok, err := handledThrough(ctx, js, input, ks, router)
	if err != nil || !ok {
		return aheadPosition{}, false, err
	}
	return aheadPosition{durable: ks.CachedInfo().Config.Name, floor: floor, filter: read}, true, nil
}

// keyedReads are the input subjects keyed stream ks received, and the
// router's durable when a router filled it: the subjects of its source's
// transforms, or the filter of f's router consumer. Nil when neither is
// there (a router consumer deleted): then nothing is known.
func keyedReads(ctx context.Context, input, ks jetstream.Stream, f manifest.FunctionSpec) ([]string, string, error) {
	cfg := ks.CachedInfo().Config
	if len(cfg.Sources) > 0 {
		src := cfg.Sources[0]
		if src.Name != input.CachedInfo().Config.Name {
			return nil, "", nil
		}
		var read []string
		for _, t := range src.SubjectTransforms {
			read = append(read, t.Source)
		}
		if src.FilterSubject != "" {
			read = append(read, src.FilterSubject)
		}
		return read, "", nil
	}
	c, err := input.Consumer(ctx, f.RouterDurable())
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return filtersOf(c.CachedInfo().Config), f.RouterDurable(), nil
}

// aheadWhileKeyed is handledWhileKeyed for binding f's consumer: nil when
// nothing is known. A failure to find out is logged, not returned: the
// consumer then starts, or stays, as it would have before.
func aheadWhileKeyed(ctx context.Context, js jetstream.JetStream, input jetstream.Stream, f manifest.FunctionSpec, log *slog.Logger) *aheadPosition {
	ahead, ok, err := handledWhileKeyed(ctx, js, input, f)
	if err != nil {
		log.Warn("reading how far the function got while it was ordered; its consumer starts as if it never was", "err", err)
	}
	if !ok {
		return nil
	}
	return &ahead
}

// known is a as a floor a consumer created now starts after; nil for nil.
func (a *aheadPosition) known() *knownFloor {
	if a == nil {
		return nil
	}
	return &knownFloor{floor: a.floor, from: "handled in key order through keyed stream " + a.durable +
		", which keeps what it had not handled"}
}
