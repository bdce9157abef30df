package runtime

import (
	"context"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// A deploy that renames a function's durable from A to B and a later one
// (or a rollback) that goes back to A find A where it stopped, behind
// everything the function handled under B since: binding A as it is
// hands all of that to the function again, outside the duplicate window
// once the detour lasted longer. So before binding an existing consumer
// jetfn compares it with the function's own position record: when that
// names another durable on this incarnation of the stream, further along,
// and that durable read every subject this one reads (as it stands, and as
// the deploy changes it), jetfn moves this consumer up to just after it
// (the server's consumer reset) and logs it. A filter the deploy widens is
// then backfilled only from past that floor (backfill.go, after).
//
// A detour that read fewer subjects is left alone, with a warning: moving
// the consumer up would skip what the detour did not read, and handing
// that over with a backfill raced with a second instance applying the
// same revision (opscheck lost messages that way). Handling the detour's
// messages again is the lesser harm: their effects are keyed, and their
// outputs deduplicated inside the window.

// catchUpReturningDurable moves spec's existing consumer up to the ack
// floor the function reached under another durable, or through its keyed
// stream (keyed, nil when it was not keyed: unkeyed.go), when that is
// safe; otherwise it leaves the consumer as it is, with a warning when it
// is behind. It never fails the bind: a consumer it cannot move is bound
// where it stands, as before.
func catchUpReturningDurable(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, spec manifest.FunctionSpec,
	positions *positionStore, log *slog.Logger, keyed *aheadPosition) {
	c, err := stream.Consumer(ctx, spec.Durable)
	if err != nil {
		return // missing: ensureConsumer creates it from the records
	}
	ahead, ok := furtherUnderAnotherDurable(ctx, stream, spec, scopeOf(c.CachedInfo().Config, spec), positions)
	if keyed != nil && (!ok || keyed.floor > ahead.floor) {
		ahead, ok = *keyed, true
	}
	if !ok {
		return
	}
	info := c.CachedInfo()
	behind := info.AckFloor.Stream
	if ahead.floor <= behind {
		return
	}
	attrs := []any{"consumer", spec.Durable, "ack_floor", behind, "other_consumer", ahead.durable, "other_ack_floor", ahead.floor}
	if !coversAll(ahead.filter, slices.Concat(filtersOf(info.Config), spec.FilterSubjects())) {
		log.Warn("consumer is behind what the function handled under another durable, which did not read the same subjects: "+
			"it resumes where it stopped, and what it hands again is handled again", attrs...)
		return
	}
	if _, err := js.ResetConsumerToSequence(ctx, spec.Stream, spec.Durable, ahead.floor+1); err != nil {
		log.Warn("consumer is behind what the function handled under another durable and could not be moved up: "+
			"it resumes where it stopped, and what it hands again is handled again", append(attrs, "err", err)...)
		return
	}
	log.Info("moved a returning durable up to where the function got to under another durable", attrs...)
}

// aheadPosition is how far the function got under another durable.
type aheadPosition struct {
	durable string
	floor   uint64
	filter  []string
}

// furtherUnderAnotherDurable is the furthest of the function's own
// position record and its lineage's (scope, a rename it returns from),
// when it names another durable on this stream incarnation, with that
// consumer's live floor and filter when it still exists.
func furtherUnderAnotherDurable(ctx context.Context, stream jetstream.Stream, spec manifest.FunctionSpec, scope string,
	positions *positionStore) (aheadPosition, bool) {
	identity := StreamIdentity(stream.CachedInfo().Created)
	var best aheadPosition
	found := false
	for _, key := range []string{functionKey(spec.Stream, spec.Name), lineageKey(spec.Stream, scope)} {
		pos, err := positions.lookupOn(ctx, identity, key)
		if err != nil || pos == nil || pos.Durable == spec.Durable {
			continue
		}
		ahead := aheadPosition{durable: pos.Durable, floor: pos.AckFloor, filter: pos.Filter}
		if other, err := stream.Consumer(ctx, pos.Durable); err == nil {
			info := other.CachedInfo()
			ahead.floor, ahead.filter = max(ahead.floor, info.AckFloor.Stream), filtersOf(info.Config)
		}
		if !found || ahead.floor > best.floor {
			best, found = ahead, true
		}
	}
	return best, found
}

// coversAll reports whether every subject (which may hold wildcards) is
// matched entirely by one of filters.
func coversAll(filters, subjects []string) bool {
	for _, s := range subjects {
		if !slices.ContainsFunc(filters, func(f string) bool { return manifest.SubjectCovered(s, f) }) {
			return false
		}
	}
	return true
}
