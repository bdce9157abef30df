package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// startDecision is where a consumer jetfn is about to create begins, and
// why, for the log line that says so.
type startDecision struct {
	policy jetstream.DeliverPolicy
	seq    uint64    // DeliverByStartSequence
	at     time.Time // DeliverByStartTime
	// resumed is true when a known position decided it, false when the
	// manifest's start did.
	resumed bool
	// readFilter is, when resumed, the filter of the durable whose floor
	// decided it; nil when unknown (a floor this process saw, or one
	// recorded without a filter). handover.go hands over the subjects it
	// did not read.
	readFilter []string
	// notes are that durable's handled-through notes (position.HandledThrough).
	notes map[string]uint64
	why   string
}

// apply sets the decision on a consumer config.
func (d startDecision) apply(cfg *jetstream.ConsumerConfig) {
	cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = d.policy, 0, nil
	switch d.policy {
	case jetstream.DeliverByStartSequencePolicy:
		cfg.OptStartSeq = d.seq
	case jetstream.DeliverByStartTimePolicy:
		at := d.at
		cfg.OptStartTime = &at
	}
}

// knownFloor is an ack floor jetfn knows for a consumer it must create,
// and where it knows it from.
type knownFloor struct {
	floor uint64
	from  string
	// filter is what the durable that reached floor read; nil: everything
	// the consumer being created reads.
	filter []string
	// notes are that durable's handled-through notes, by subject.
	notes map[string]uint64
}

// decideStart picks where f's consumer starts on the stream described by
// info: just after the highest ack floor known for this incarnation of
// the stream (the one this process saw, the recorded one, the live one of
// the consumer a rename left behind), else as the manifest's start says.
func decideStart(ctx context.Context, s jetstream.Stream, f manifest.FunctionSpec, positions *positionStore, seen *knownFloor) (startDecision, error) {
	info := s.CachedInfo()
	if info.Config.Retention == jetstream.WorkQueuePolicy {
		// A work queue keeps only unacknowledged messages and accepts only
		// DeliverAll, which there means the same as after the floor.
		return startDecision{policy: jetstream.DeliverAllPolicy, why: "work-queue stream: every message not yet acknowledged"}, nil
	}
	known, err := knownFloors(ctx, s, f, positions)
	if err != nil {
		return startDecision{}, err
	}
	if seen != nil {
		known = append(known, *seen)
	}
	if len(known) == 0 {
		return manifestStart(f), nil
	}
	best := known[0]
	for _, k := range known[1:] {
		if k.floor > best.floor {
			best = k
		}
	}
	return startDecision{policy: jetstream.DeliverByStartSequencePolicy, seq: best.floor + 1, resumed: true,
		readFilter: best.filter, notes: best.notes, why: fmt.Sprintf("resumes after ack floor %d (%s)", best.floor, best.from)}, nil
}

// knownFloors are the floors recorded for f's consumer, or for the
// function it was renamed from, on this incarnation of the stream; the one
// recorded for its lineage under another durable (a rename it returns
// from), when that durable read every subject f reads; and the live floor
// of the consumer such a record names if it still exists.
func knownFloors(ctx context.Context, s jetstream.Stream, f manifest.FunctionSpec, positions *positionStore) ([]knownFloor, error) {
	identity := StreamIdentity(s.CachedInfo().Created)
	own, err := positions.lookupOn(ctx, identity, positionKeys(f.Stream, f.Durable, f.Name, f.RenamedFrom)...)
	if err != nil {
		return nil, err
	}
	lineage, err := positions.lookupOn(ctx, identity, lineageKey(f.Stream, decideScope(ctx, s, f, positions)))
	if err != nil {
		return nil, err
	}
	var known []knownFloor
	if own != nil {
		known = append(known, recordedFloors(ctx, s, f, *own)...)
	}
	if lineage != nil && lineage.Durable != f.Durable && coversAll(lineage.Filter, f.FilterSubjects()) {
		known = append(known, recordedFloors(ctx, s, f, *lineage)...)
	}
	return known, nil
}

// recordedFloors are pos's floor and, when pos names another durable that
// still exists, that consumer's live floor.
func recordedFloors(ctx context.Context, s jetstream.Stream, f manifest.FunctionSpec, pos position) []knownFloor {
	known := []knownFloor{{floor: pos.AckFloor, filter: pos.Filter, notes: pos.HandledThrough,
		from: fmt.Sprintf("recorded for consumer %s at %s", pos.Durable, pos.At.Format(time.RFC3339))}}
	if pos.Durable != f.Durable {
		if old, err := s.Consumer(ctx, pos.Durable); err == nil {
			cfg := old.CachedInfo().Config
			known = append(known, knownFloor{floor: old.CachedInfo().AckFloor.Stream, filter: filtersOf(cfg), notes: handledNotes(cfg.Metadata),
				from: "the live ack floor of consumer " + pos.Durable + ", which this one replaces"})
		}
	}
	return known
}

// manifestStart is the function's start when no position is known.
func manifestStart(f manifest.FunctionSpec) startDecision {
	if at, ok := f.StartTime(); ok {
		return startDecision{policy: jetstream.DeliverByStartTimePolicy, at: at,
			why: "no recorded position; manifest start " + f.Start + ": messages stored from then on"}
	}
	if f.Start == manifest.StartNew {
		return startDecision{policy: jetstream.DeliverNewPolicy,
			why: "no recorded position; manifest start new: only messages stored from now on"}
	}
	return startDecision{policy: jetstream.DeliverAllPolicy,
		why: "no recorded position; manifest start all: every stored message"}
}
