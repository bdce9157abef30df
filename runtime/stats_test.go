package runtime

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCountersObserve: the processing-time window keeps every worker
// slot's last runs, durationWindow in all, for the average and p99, and
// stays consistent under concurrent workers (run with -race). Pure logic.
func TestCountersObserve(t *testing.T) {
	c := newCounters(8)
	if avg, _, p99 := c.processingTimes(); avg != 0 || p99 != 0 {
		t.Fatalf("empty window: avg %v, p99 %v; want 0, 0", avg, p99)
	}
	for i := 1; i <= 100; i++ {
		c.slot(0).observe(time.Duration(i) * time.Millisecond)
	}
	if avg, p50, p99 := c.processingTimes(); avg != 50.5 || p50 != 50 || p99 != 99 {
		t.Fatalf("1..100 ms: avg %v, p50 %v, p99 %v; want 50.5, 50, 99", avg, p50, p99)
	}
	var wg sync.WaitGroup
	for slot := range 8 {
		wg.Go(func() {
			for range 1000 {
				c.slot(slot).observe(time.Second)
			}
		})
	}
	wg.Wait()
	if avg, _, p99 := c.processingTimes(); avg != 1000 || p99 != 1000 {
		t.Fatalf("after 8,000 runs of 1 s: avg %v ms, p99 %v ms; want the window all 1 s", avg, p99)
	}
	total := 0
	for i := range c.perWorker {
		total += len(c.perWorker[i].durations)
	}
	if total != durationWindow {
		t.Fatalf("the window holds %d runs over 8 workers, want %d", total, durationWindow)
	}
}

// TestCountersSnapshotSumsWorkers: handled, acked and in-flight figures are
// the sums of the worker slots, and a run counts as in flight from its
// start until its worker is done with it, settle included. Pure logic.
func TestCountersSnapshotSumsWorkers(t *testing.T) {
	c := newCounters(3)
	for slot := range 3 {
		s := c.slot(slot)
		for range slot + 1 {
			s.started.Add(1)
			s.handled.Add(1)
			s.acked.Add(1)
			s.ended.Add(1)
		}
	}
	c.slot(1).started.Add(1) // running now
	c.slot(2).started.Add(1) // its handler returned, its ack not yet sent
	c.slot(2).handled.Add(1)
	s := c.snapshot("f")
	if s.Handled != 7 || s.Acked != 6 || s.InFlight != 2 {
		t.Fatalf("snapshot: handled %d, acked %d, in flight %d; want 7, 6, 2", s.Handled, s.Acked, s.InFlight)
	}
}

// TestEWMABatch: a worker folds its fast runs into the function's average
// every ewmaBatchRuns runs, a slow run at once, and the average moves a
// sixteenth of the way towards each run. Pure logic.
func TestEWMABatch(t *testing.T) {
	var avg atomic.Int64
	var b ewmaBatch
	for range ewmaBatchRuns - 1 {
		b.add(time.Microsecond, &avg)
	}
	if got := avg.Load(); got != 0 {
		t.Fatalf("after %d runs of 1 µs the average is %v, want nothing folded yet", ewmaBatchRuns-1, time.Duration(got))
	}
	b.add(time.Microsecond, &avg)
	if got := time.Duration(avg.Load()); got != time.Microsecond {
		t.Fatalf("after %d runs of 1 µs the average is %v, want 1µs", ewmaBatchRuns, got)
	}
	b.add(17*time.Millisecond, &avg)
	if got, want := time.Duration(avg.Load()), time.Microsecond+(17*time.Millisecond-time.Microsecond)/16; got != want {
		t.Fatalf("after one run of 17 ms the average is %v, want %v (folded at once)", got, want)
	}
	// A slow run folds by itself, after the fast runs before it, so it
	// weighs a sixteenth, not a thirty-second.
	var slow atomic.Int64
	var sb ewmaBatch
	for range 31 {
		sb.add(10*time.Microsecond, &slow)
	}
	sb.add(10*time.Second, &slow)
	if got, want := time.Duration(slow.Load()), 10*time.Microsecond+(10*time.Second-10*time.Microsecond)/16; got != want {
		t.Fatalf("31 runs of 10 µs, then one of 10 s: average %v, want %v", got, want)
	}
	if got := foldAverage(0, time.Second, 200); got < 999*time.Millisecond || got > time.Second {
		t.Fatalf("200 runs of 1 s from nothing average %v, want 1 s", got)
	}
	if got := foldAverage(time.Second, 0, 16); got < 340*time.Millisecond || got > 370*time.Millisecond {
		t.Fatalf("16 runs of 0 after 1 s average %v, want about (15/16)^16 s = 356 ms", got)
	}
}
