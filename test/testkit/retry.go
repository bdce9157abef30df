package testkit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// retryEvery spaces the attempts of Retry; attemptTimeout bounds one, so
// a request that went to a node as it died does not use up the deadline.
const (
	retryEvery     = 200 * time.Millisecond
	attemptTimeout = 10 * time.Second
)

// transientCodes are the JetStream API errors a request meets while the
// cluster cannot answer yet, not because of what it asked.
var transientCodes = map[jetstream.ErrorCode]bool{
	10004: true, // incomplete results: a peer did not answer in time
	10005: true, // no suitable peers for placement: a peer of a cluster just started not seen yet
	10008: true, // JetStream system temporarily unavailable: no meta leader yet
	10009: true, // JetStream cluster can not handle request: not the leader (any more)
	10076: true, // JetStream not enabled: a restarted node before JetStream is up
}

// Transient reports whether err is one a JetStream read meets while a
// server restarts, a client reconnects or a stream or consumer elects a
// leader, and the same read a moment later does not: no responders, a
// timeout, "JetStream system temporarily unavailable", "not the leader",
// no leader yet (Leaders), a stalled scan (ScanNotifications).
// A message or stream that is not found is never transient: a loss must
// stay a loss.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range []error{nats.ErrNoResponders, nats.ErrTimeout, context.DeadlineExceeded,
		nats.ErrConnectionReconnecting, nats.ErrDisconnected, jetstream.ErrNoHeartbeat, ErrNoLeader, ErrScanStalled} {
		if errors.Is(err, e) {
			return true
		}
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && transientCodes[apiErr.ErrorCode]
}

// Retry runs read until it returns nil, returns an error that is not
// Transient, or within has passed (then it returns read's last error).
// Each attempt gets at most attemptTimeout. read must be safe to repeat:
// a read, or a scan that starts over.
func Retry(ctx context.Context, within time.Duration, what string, read func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, attemptTimeout)
		err := read(actx)
		acancel()
		if err == nil || !Transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: still failing after %s: %w", what, within, err)
		case <-time.After(retryEvery):
		}
	}
}
