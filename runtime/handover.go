package runtime

import (
	"context"
	"fmt"
	"log/slog"

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
// (filterchange.go): from where the function's start says, up to where
// the new consumer begins.

// handOverUnread creates the backfill of the subjects f reads that the
// durable deciding start (d.readBy) did not, and names it in want, the new
// consumer's config. Nothing when that durable read them all, or when f
// starts with new messages.
func handOverUnread(ctx context.Context, stream jetstream.Stream, f manifest.FunctionSpec, digest string, d startDecision,
	want *jetstream.ConsumerConfig) error {
	if d.readBy == nil {
		return nil
	}
	start, err := startSeq(ctx, stream, f)
	if err != nil || start == 0 {
		return err
	}
	plan := &backfillPlan{from: map[string]uint64{}}
	for _, s := range f.FilterSubjects() {
		if !coversAll(d.readBy, []string{s}) {
			plan.from[s] = start
		}
	}
	for _, s := range d.readBy {
		plan.skip = append(plan.skip, skipRange{Subject: s}) // handled below the floor, the new consumer's above it
	}
	cfg, err := plan.config(backfillName(f.Durable, ""), f, digest)
	if err != nil {
		return err
	}
	if _, err := stream.CreateOrUpdateConsumer(ctx, cfg); err != nil {
		return fmt.Errorf("%w: creating backfill consumer %s: %v", ErrServerRefused, cfg.Durable, err)
	}
	want.Metadata[backfillKey] = cfg.Durable
	return nil
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
