package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"

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
// jetfn moves this consumer up to just after it (the server's consumer
// reset) and logs it. What B did not read (a narrower filter) is not
// skipped: A takes B's filter first, with a handled-through note at its
// own floor for each subject B left out, so the filter change that
// follows hands those subjects' messages over with a backfill consumer
// (filterchange.go), as any widening does.

// catchUpReturningDurable moves spec's existing consumer up to the ack
// floor the function reached under another durable. It never fails the
// bind: a consumer it cannot move is bound where it stands, as before,
// with a warning.
func catchUpReturningDurable(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, spec manifest.FunctionSpec,
	positions *positionStore, log *slog.Logger) {
	c, err := stream.Consumer(ctx, spec.Durable)
	if err != nil {
		return // missing: ensureConsumer creates it from the records
	}
	ahead, ok := furtherUnderAnotherDurable(ctx, stream, spec, positions)
	if !ok {
		return
	}
	info := c.CachedInfo()
	if ahead.floor <= info.AckFloor.Stream || info.Config.Metadata[backfillKey] != "" {
		return // not behind; or in the middle of a filter change, which hands its own range over
	}
	attrs := []any{"consumer", spec.Durable, "ack_floor", info.AckFloor.Stream, "other_consumer", ahead.durable,
		"other_ack_floor", ahead.floor, "other_filter", ahead.filter}
	if err := moveUp(ctx, js, stream, info, ahead); err != nil {
		log.Warn("consumer is behind what the function handled under another durable and could not be moved up: "+
			"it resumes where it stopped, and what it hands again is handled again", append(attrs, "err", err)...)
		return
	}
	log.Info("moved a returning durable up to where the function got to under another durable", attrs...)
}

// moveUp gives the consumer ahead's filter, notes the subjects ahead did
// not read as handled through the consumer's own floor, and resets it to
// just after ahead's floor.
func moveUp(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, info *jetstream.ConsumerInfo, ahead aheadPosition) error {
	have := filtersOf(info.Config)
	if !slices.Equal(sorted(have), sorted(ahead.filter)) {
		if len(ahead.filter) == 0 {
			return errors.New("the other durable's filter is not known")
		}
		cfg := info.Config
		cfg.Metadata = maps.Clone(cfg.Metadata)
		if cfg.Metadata == nil {
			cfg.Metadata = map[string]string{}
		}
		for _, s := range have {
			if _, noted := cfg.Metadata[handledThroughPrefix+s]; !noted && !coversAll(ahead.filter, []string{s}) {
				cfg.Metadata[handledThroughPrefix+s] = strconv.FormatUint(info.AckFloor.Stream, 10)
			}
		}
		cfg.FilterSubject, cfg.FilterSubjects = "", ahead.filter
		if _, err := stream.UpdateConsumer(ctx, cfg); err != nil {
			return fmt.Errorf("taking the other durable's filter: %w", err)
		}
	}
	_, err := js.ResetConsumerToSequence(ctx, info.Stream, info.Name, ahead.floor+1)
	return err
}

// aheadPosition is how far the function got under another durable.
type aheadPosition struct {
	durable string
	floor   uint64
	filter  []string
}

// furtherUnderAnotherDurable is the function's own position record when
// it names another durable on this stream incarnation, with that
// consumer's live floor and filter when it still exists.
func furtherUnderAnotherDurable(ctx context.Context, stream jetstream.Stream, spec manifest.FunctionSpec,
	positions *positionStore) (aheadPosition, bool) {
	pos, err := positions.lookup(ctx, spec.Stream, "", spec.Name)
	if err != nil || pos == nil || pos.Durable == spec.Durable || pos.StreamIdentity != StreamIdentity(stream.CachedInfo().Created) {
		return aheadPosition{}, false
	}
	ahead := aheadPosition{durable: pos.Durable, floor: pos.AckFloor, filter: pos.Filter}
	if other, err := stream.Consumer(ctx, pos.Durable); err == nil {
		info := other.CachedInfo()
		ahead.floor, ahead.filter = max(ahead.floor, info.AckFloor.Stream), filtersOf(info.Config)
	}
	return ahead, true
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
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
