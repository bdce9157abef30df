package simulate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetfn/jetfn"
)

// The waits between tries of one step: doubling from firstRetryDelay up to
// maxRetryDelay, so a step rides out a restart of Mongo or NATS within a
// second or two of its return and a long outage costs a try every few
// seconds.
const (
	firstRetryDelay = 100 * time.Millisecond
	maxRetryDelay   = 2 * time.Second
)

// retry runs step until it succeeds, its error is permanent, or ctx ends,
// as a transcriber riding out an outage does. That is safe because every
// step of a simulation is idempotent: a segment save is an upsert on its
// key and every publish carries a Nats-Msg-Id, so a second try never
// doubles an effect. A payload the contract refuses (*jetfn.PayloadError)
// fails the same way every time and is returned at once. Each failed try
// is logged at warn level, naming what, so a user watching a slow
// simulation sees why it is slow. When ctx ends, the last try's error is
// returned with how many tries were made.
func retry(ctx context.Context, log *slog.Logger, what string, step func(context.Context) error) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	delay := firstRetryDelay
	for tries := 1; ; tries++ {
		err := step(ctx)
		if err == nil {
			return nil
		}
		if permanent(err) {
			return err
		}
		if ctx.Err() == nil {
			log.Warn("simulate: retrying", "step", what, "try", tries, "in", delay, "err", err)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return fmt.Errorf("%w (%d tries before the simulation's timeout)", err, tries)
		}
		delay = min(2*delay, maxRetryDelay)
	}
}

// permanent reports whether err would come back on every try.
func permanent(err error) bool {
	var payload *jetfn.PayloadError
	return errors.As(err, &payload)
}
