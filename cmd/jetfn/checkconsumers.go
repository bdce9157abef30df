package main

import (
	"context"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
)

// checkConsumers prints, for every function, where its durable consumer is
// on server, or where jetfn would start it and how many stored messages
// that hands to the function: a consumer that starts over stored history
// is a decision to see before a deploy, not after.
func checkConsumers(ctx context.Context, m *manifest.Manifest, server string, cfg Config, out, errOut io.Writer) error {
	return withJetStreamAt(server, cfg.NATS, cfg.newLogger(errOut), func(js jetstream.JetStream) error {
		plans, err := runtime.PlanStarts(ctx, js, m)
		if err != nil {
			return fmt.Errorf("asking %s about the consumers: %w", redactURLs(server), err)
		}
		for _, p := range plans {
			fmt.Fprintln(out, describeStart(p))
			for _, subject := range p.AddedSubjects {
				fmt.Fprintf(out, "  subject %s is added: what the input already stored on it may never be handled, since keyed "+
					"stream %s's source takes it up from where the source stands (docs/ordering.md)\n", subject, p.KeyedStream)
			}
		}
		// What deploy would refuse, check says first.
		refusals, err := runtime.ServerRefusals(ctx, js, m)
		if err != nil {
			return fmt.Errorf("asking %s about the streams: %w", redactURLs(server), err)
		}
		for _, r := range refusals {
			fmt.Fprintf(out, "! %s\n", r)
		}
		if len(refusals) > 0 {
			return errCheckFailed
		}
		return nil
	})
}

// describeStart is one function's line.
func describeStart(p runtime.StartPlan) string {
	switch {
	case p.KeyedStream != "" && !p.Exists:
		return fmt.Sprintf("%s: keyed stream %s does not exist yet; jetfn would create it, with %d partitions: %s",
			p.Function, p.KeyedStream, p.Partitions, p.Start)
	case p.KeyedStream != "":
		return fmt.Sprintf("%s: keyed stream %s exists (%d partitions, %d messages not yet handled)",
			p.Function, p.KeyedStream, p.Partitions, p.Pending)
	case p.StreamMissing:
		return fmt.Sprintf("%s: stream %s does not exist yet; jetfn creates it, and consumer %s starts with nothing stored",
			p.Function, p.Stream, p.Consumer)
	case p.Exists:
		return fmt.Sprintf("%s: consumer %s exists on %s (delivered up to stream sequence %d, %d pending)",
			p.Function, p.Consumer, p.Stream, p.Delivered, p.Pending)
	}
	return fmt.Sprintf("%s: consumer %s is missing on %s; jetfn would create it: %s: %d stored messages to handle",
		p.Function, p.Consumer, p.Stream, p.Start, p.Pending)
}
