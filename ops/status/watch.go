package status

import (
	"context"
	"time"
)

// DefaultInterval is how often --watch refreshes.
const DefaultInterval = 2 * time.Second

// Watch calls show at once and then every interval until ctx is done or show
// fails. A Ctrl-C ends it with nil: that is how a watch is meant to end.
func Watch(ctx context.Context, interval time.Duration, show func(context.Context) error) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := show(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}
