package summarizesession

import (
	"context"
	"errors"
	"testing"
	"time"
)

// script is a count func that answers from a list; the last answer repeats.
func script(counts ...int) (countFunc, *int) {
	calls := 0
	return func(context.Context) (int, error) {
		n := counts[min(calls, len(counts)-1)]
		calls++
		return n, nil
	}, &calls
}

func TestWaitStable(t *testing.T) {
	tests := []struct {
		name       string
		counts     []int
		maxRounds  int
		want       stability
		wantCounts int
	}{
		{name: "already stable", counts: []int{12}, maxRounds: 5, want: stability{count: 12, rounds: 1, stable: true}, wantCounts: 2},
		{name: "late segments settle", counts: []int{9, 11, 12, 12}, maxRounds: 5, want: stability{count: 12, rounds: 3, stable: true}, wantCounts: 4},
		{name: "empty session", counts: []int{0}, maxRounds: 5, want: stability{count: 0, rounds: 1, stable: true}, wantCounts: 2},
		{name: "keeps growing stops at maxRounds", counts: []int{1, 2, 3, 4, 5, 6, 7, 8}, maxRounds: 5, want: stability{count: 6, rounds: 5}, wantCounts: 6},
		{name: "one round", counts: []int{1, 2, 3}, maxRounds: 1, want: stability{count: 2, rounds: 1}, wantCounts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count, calls := script(tt.counts...)
			var waits []time.Duration
			wait := func(_ context.Context, d time.Duration) error {
				waits = append(waits, d)
				return nil
			}
			got, err := waitStable(context.Background(), 2*time.Second, tt.maxRounds, count, wait)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("waitStable = %+v, want %+v", got, tt.want)
			}
			if *calls != tt.wantCounts || len(waits) != tt.want.rounds {
				t.Errorf("counted %d times and waited %d times, want %d and %d", *calls, len(waits), tt.wantCounts, tt.want.rounds)
			}
			for _, d := range waits {
				if d != 2*time.Second {
					t.Errorf("waited %s, want the quiet period", d)
				}
			}
		})
	}
}

// TestWaitStableCancelled uses the real sleep with an hour-long quiet
// period: only cancellation can end the wait.
func TestWaitStableCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	count := func(context.Context) (int, error) {
		calls++
		go cancel() // cancel while the first wait is running
		return calls, nil
	}
	start := time.Now()
	_, err := waitStable(ctx, time.Hour, 5, count, sleep)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if calls != 1 {
		t.Errorf("counted %d times after cancel, want 1", calls)
	}
	t.Logf("returned %s after cancel", time.Since(start))
}

func TestWaitStableCountError(t *testing.T) {
	boom := errors.New("mongo down")
	count := func(context.Context) (int, error) { return 0, boom }
	_, err := waitStable(context.Background(), time.Second, 5, count, sleep)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the count's error", err)
	}
}
