package summarizesession

import (
	"context"
	"fmt"
	"time"
)

// countFunc counts a session's stored segments.
type countFunc func(ctx context.Context) (int, error)

// waitFunc waits for d, or returns ctx's error once ctx is done. Tests
// inject one that does not sleep.
type waitFunc func(ctx context.Context, d time.Duration) error

// stability is what waitStable saw.
type stability struct {
	count  int
	rounds int  // waits made
	stable bool // false when maxRounds ran out with the count still moving
}

// waitStable waits for late segments: it counts, waits quiet, counts again,
// and stops when two counts in a row match or after maxRounds waits. It
// returns the last count either way; the caller decides what a moving count
// means.
func waitStable(ctx context.Context, quiet time.Duration, maxRounds int, count countFunc, wait waitFunc) (stability, error) {
	prev, err := count(ctx)
	if err != nil {
		return stability{}, err
	}
	for round := 1; round <= maxRounds; round++ {
		if err := wait(ctx, quiet); err != nil {
			return stability{}, fmt.Errorf("waiting for late segments: %w", err)
		}
		cur, err := count(ctx)
		if err != nil {
			return stability{}, err
		}
		if cur == prev {
			return stability{count: cur, rounds: round, stable: true}, nil
		}
		prev = cur
	}
	return stability{count: prev, rounds: maxRounds}, nil
}

// sleep is the real waitFunc.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
