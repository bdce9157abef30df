package runtime

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// A consumer jetfn creates resumes after the floor of the durable that
// carried the function before (a durable renamed, a function renamed, one
// lost and made again). When that durable read fewer subjects than the new
// one reads (a deploy that renames the durable and adds a subject at
// once), the floor says nothing of the others: starting after it passed
// over what they stored below it, and nobody ever handled that (opscheck
// seed 20261217 lost 40 messages so). So the creation hands those subjects
// over with a backfill consumer, as a filter widening does
// (filterchange.go): from just after what the function noted it handled of
// them, else from where its start says, up to where the new consumer
// begins. The notes themselves go to the new consumer too: without them a
// consumer created from a record forgot how far the function got on the
// subjects a deploy had dropped, and a later widening handed those over
// from their first message (the same seed: 30 outputs twice).

// handOverUnread carries over, into want (the new consumer's config), how
// far the durable deciding start d got on the subjects the new consumer
// does not read: its own handled-through notes, and its floor for the
// subjects it read (a creation with fewer subjects is a narrowing, as
// planFilterChange notes one), so a later widening does not hand them
// over again. It creates the backfill of the subjects f reads that that
// durable did not: each from just after its note, else from
// where f's start says, up to where the new consumer begins.
func handOverUnread(ctx context.Context, stream jetstream.Stream, f manifest.FunctionSpec, digest string, d startDecision,
	want *jetstream.ConsumerConfig) error {
	if !d.resumed {
		return nil
	}
	read := d.readFilter
	if read == nil {
		read = f.FilterSubjects()
	}
	for s, through := range d.notes {
		if !coversAll(read, []string{s}) {
			want.Metadata[handledThroughPrefix+s] = strconv.FormatUint(through, 10)
		}
	}
	change := filterChange{added: uncovered(f.FilterSubjects(), read), removed: uncovered(read, f.FilterSubjects())}
	if change.empty() {
		return nil
	}
	start, err := startSeq(ctx, stream, f)
	if err != nil {
		return err
	}
	plan := planFilterChange(change, read, want.Metadata, d.seq-1, start)
	if plan != nil {
		for s, from := range plan.from {
			if from >= d.seq {
				delete(plan.from, s) // handled past where the new consumer begins
			}
		}
	}
	if plan == nil || len(plan.from) == 0 {
		return nil
	}
	// The new consumer reads these subjects from the start on: it passes
	// over none of them, so the backfill ends exactly before it begins,
	// whatever it delivers before an instance binds the backfill.
	plan.through = d.seq - 1
	return startBackfill(ctx, stream, plan, backfillName(f.Durable, ""), f, digest, want)
}

// uncovered are the subjects no filter covers entirely.
func uncovered(subjects, filters []string) []string {
	var out []string
	for _, s := range subjects {
		if !coversAll(filters, []string{s}) {
			out = append(out, s)
		}
	}
	return out
}

// dropUnnamedBackfill deletes backfill consumer name (none when empty),
// made for a consumer another instance created first, unless that one
// names it: left, nothing would ever read or delete it.
func dropUnnamedBackfill(ctx context.Context, stream jetstream.Stream, f manifest.FunctionSpec, name string, log *slog.Logger) {
	if name == "" {
		return
	}
	if theirs, err := stream.Consumer(ctx, f.Durable); err != nil || theirs.CachedInfo().Config.Metadata[backfillKey] == name {
		return
	}
	if err := deleteConsumer(ctx, stream, name); err != nil && log != nil {
		log.Warn("deleting a backfill consumer no consumer names", "consumer", name, "err", err)
	}
}
