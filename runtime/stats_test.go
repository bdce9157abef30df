package runtime

import (
	"sync"
	"testing"
	"time"
)

// TestCountersObserve: the processing-time window keeps the last
// durationWindow runs for the average and p99, and stays consistent under
// concurrent workers (run with -race). Pure logic.
func TestCountersObserve(t *testing.T) {
	var c counters
	if avg, p99 := c.processingTimes(); avg != 0 || p99 != 0 {
		t.Fatalf("empty window: avg %v, p99 %v; want 0, 0", avg, p99)
	}
	for i := 1; i <= 100; i++ {
		c.observe(time.Duration(i) * time.Millisecond)
	}
	if avg, p99 := c.processingTimes(); avg != 50.5 || p99 != 99 {
		t.Fatalf("1..100 ms: avg %v, p99 %v; want 50.5, 99", avg, p99)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.observe(time.Second)
			}
		})
	}
	wg.Wait()
	if avg, p99 := c.processingTimes(); avg != 1000 || p99 != 1000 {
		t.Fatalf("after 8,000 runs of 1 s: avg %v ms, p99 %v ms; want the window all 1 s", avg, p99)
	}
	if got := c.observed.Load(); got != 8100 {
		t.Fatalf("observed %d runs, want 8100", got)
	}
	if avg := c.recentAverage(); avg < 900*time.Millisecond || avg > time.Second {
		t.Fatalf("recent average %v, want close to 1 s", avg)
	}
}
