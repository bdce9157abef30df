// Package pause pauses and resumes a function on the server, for `jetfn
// pause` and `jetfn resume`: every consumer that hands the function's
// messages to its handler (its durable, a keyed function's partitions, a
// backfill consumer while one runs) gets the server's PauseUntil, so every
// instance stops at once, and nothing in a process has to remember it: a
// restart or a live deploy keeps the server's PauseUntil (the runtime
// overlays its settings on the consumer's config), and the server resumes
// the consumers by itself at the time. A keyed function's router consumer
// and its backfills are left running: they only copy messages into the
// partitions.
package pause

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/wire"
)

// Indefinitely is the pause of `jetfn pause` without --until: until
// someone resumes the function (the server needs a time; this one is a
// century ahead).
func Indefinitely(now time.Time) time.Time { return now.AddDate(100, 0, 0) }

// Consumer is one consumer of the function, as a pause or resume left it.
type Consumer struct {
	Stream, Name string
	// PausedUntil is when the server resumes it; zero when it runs.
	PausedUntil time.Time
}

func (c Consumer) String() string { return c.Stream + "/" + c.Name }

// ErrNoConsumers is a function with no consumer on the server: a name
// misspelled, or a function no instance has started yet.
var ErrNoConsumers = errors.New("no consumer of that function on this server")

// Pause pauses every consumer of function until until.
func Pause(ctx context.Context, js jetstream.JetStream, function string, until time.Time) ([]Consumer, error) {
	return each(ctx, js, function, func(s jetstream.Stream, name string) (time.Time, error) {
		r, err := s.PauseConsumer(ctx, name, until)
		if err != nil {
			return time.Time{}, err
		}
		return r.PauseUntil, nil
	})
}

// Resume resumes every consumer of function now.
func Resume(ctx context.Context, js jetstream.JetStream, function string) ([]Consumer, error) {
	return each(ctx, js, function, func(s jetstream.Stream, name string) (time.Time, error) {
		_, err := s.ResumeConsumer(ctx, name)
		return time.Time{}, err
	})
}

// each applies act to every consumer of function, found by the metadata
// the runtime gives them, on every stream, but a keyed function's router
// and its backfills, which only copy into the partitions.
func each(ctx context.Context, js jetstream.JetStream, function string,
	act func(s jetstream.Stream, consumer string) (time.Time, error)) ([]Consumer, error) {
	var out []Consumer
	streams := js.ListStreams(ctx)
	for info := range streams.Info() {
		s, err := js.Stream(ctx, info.Config.Name)
		if err != nil {
			return out, fmt.Errorf("looking up stream %s: %w", info.Config.Name, err)
		}
		consumers := s.ListConsumers(ctx)
		for c := range consumers.Info() {
			if c.Config.Metadata[wire.FunctionMetadataKey] != function || c.Config.Metadata[wire.RoleMetadataKey] == wire.RoleRouter {
				continue
			}
			until, err := act(s, c.Name)
			if err != nil {
				return out, fmt.Errorf("consumer %s/%s: %w", info.Config.Name, c.Name, err)
			}
			out = append(out, Consumer{Stream: info.Config.Name, Name: c.Name, PausedUntil: until})
		}
		if err := consumers.Err(); err != nil {
			return out, fmt.Errorf("listing the consumers of stream %s: %w", info.Config.Name, err)
		}
	}
	if err := streams.Err(); err != nil {
		return out, fmt.Errorf("listing the streams: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoConsumers, function)
	}
	return out, nil
}
