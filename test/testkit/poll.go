package testkit

import (
	"context"
	"fmt"
	"time"
)

// Poll calls cond every interval until it reports done, returns an error,
// or ctx is done. A transient error (a server restarting) is what cond
// reports as not done.
func Poll(ctx context.Context, interval time.Duration, what string, cond func(ctx context.Context) bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for !cond(ctx) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ErrDeadline)
		case <-t.C:
		}
	}
	return nil
}
