package simulate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"go.mongodb.org/mongo-driver/v2/mongo"

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
// doubles an effect, even when the first one timed out after it landed.
// Each failed try is logged at warn level, naming what, so a user watching
// a slow simulation sees why it is slow. When ctx ends, the last try's
// error is returned with how many tries were made.
func retry(ctx context.Context, log *slog.Logger, what string, step func(context.Context) error) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	delay := firstRetryDelay
	for tries := 1; ; tries++ {
		err := step(ctx)
		if err == nil || permanent(err) {
			return err
		}
		if ctx.Err() == nil {
			log.Warn("simulate: retrying", "step", what, "try", tries, "in", delay, "err", err)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up after %s: %w)", err, triesText(tries), ctx.Err())
		}
		delay = min(2*delay, maxRetryDelay)
	}
}

// Mongo's codes for a user it does not know or may not let in.
const (
	mongoUnauthorized         = 13
	mongoAuthenticationFailed = 18
)

// permanent reports whether err would come back on every try, so retrying
// would only hide it until the timeout: a payload the contract refuses, a
// client already closed, or credentials Mongo refuses. Anything else may be
// an outage or a loaded server, and is tried again.
func permanent(err error) bool {
	var payload *jetfn.PayloadError
	var server mongo.ServerError
	switch {
	case errors.As(err, &payload), errors.Is(err, mongo.ErrClientDisconnected), errors.Is(err, nats.ErrConnectionClosed):
		return true
	case errors.As(err, &server):
		return server.HasErrorCode(mongoUnauthorized) || server.HasErrorCode(mongoAuthenticationFailed)
	}
	return false
}

func triesText(n int) string {
	if n == 1 {
		return "1 try"
	}
	return fmt.Sprintf("%d tries", n)
}
