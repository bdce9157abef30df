package runtime

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/jetfn/jetfn/wire"
)

// durationWindow is how many recent processing times feed the average and
// p99, shared among the workers; a window keeps the figures current and
// the memory fixed.
const durationWindow = 1024

// counters are a function's live counters, safe for concurrent use.
type counters struct {
	retried, termed             atomic.Uint64
	deadLettered, redeliveries  atomic.Uint64
	deadLetterFailures          atomic.Uint64
	heartbeats, bufferBeats     atomic.Uint64
	duplicateOutputs, abandoned atomic.Uint64
	ticksSkipped                atomic.Uint64
	abandonedRunning            atomic.Int64
	ewma                        atomic.Int64 // nanoseconds, see recentAverage
	lastError                   atomic.Pointer[string]

	// perWorker holds what every message bumps, one slot per worker.
	perWorker []workerCounters
}

// workerCounters are the counters one worker slot bumps for every message,
// on cache lines of its own. Shared by all workers, those few atomics were
// written from both cores of the bench machine for every message, and each
// write waited for the other core's copy of the line (issue 16's profile:
// the processing-time ring alone took 150 ns a message). A replaced
// worker's handler that returns late still writes its slot, beside its
// replacement: every field is atomic.
type workerCounters struct {
	handled, acked atomic.Uint64
	// started counts the handler runs begun and ended those whose worker
	// is done with them, settled or not: the difference is in flight.
	started, ended atomic.Uint64
	// durations is a ring of the slot's last processing times: observed
	// counts every one, and index observed-1 mod its length holds the
	// latest.
	durations []atomic.Int64
	observed  atomic.Uint64
	// No other slot's fields on these lines, nor on the next (x86
	// prefetches lines in pairs).
	_ [128]byte
}

// newCounters makes the counters of a function with concurrency workers.
// The processing-time window, durationWindow runs, is shared equally among
// the workers, at least 16 runs each (so above 64 workers it holds more).
// Each worker's share keeps that worker's last runs: one that stops taking
// messages, as one stuck in a handler without a timeout, keeps its old
// ones in the average and p99.
func newCounters(concurrency int) *counters {
	c := &counters{perWorker: make([]workerCounters, max(concurrency, 1))}
	ring := max(durationWindow/len(c.perWorker), 16)
	for i := range c.perWorker {
		c.perWorker[i].durations = make([]atomic.Int64, ring)
	}
	return c
}

// slot is worker i's counters.
func (c *counters) slot(i int) *workerCounters { return &c.perWorker[i%len(c.perWorker)] }

// observe records one processing time in the slot's window.
func (w *workerCounters) observe(d time.Duration) {
	i := w.observed.Add(1) - 1
	w.durations[i%uint64(len(w.durations))].Store(int64(d))
}

// ewmaBatch gathers one worker's processing times for the function's
// average: folding each into the shared average was a compare-and-swap on
// a line every worker writes, for every message. It folds after
// ewmaBatchRuns runs, or once they add up to ewmaBatchTime; a run that
// alone takes ewmaBatchTime or more folds by itself, after the batch
// before it, so a slow handler's time weighs as much as it did unbatched.
// Owned by one worker goroutine.
type ewmaBatch struct {
	sum time.Duration
	n   int
}

const (
	ewmaBatchRuns = 32
	ewmaBatchTime = time.Millisecond
)

// add counts one processing time, folding into avg when the batch is full.
func (b *ewmaBatch) add(d time.Duration, avg *atomic.Int64) {
	if d >= ewmaBatchTime {
		b.fold(avg)
		foldInto(avg, d, 1)
		return
	}
	b.sum += d
	b.n++
	if b.n >= ewmaBatchRuns || b.sum >= ewmaBatchTime {
		b.fold(avg)
	}
}

// fold moves avg as the batch's runs would have one by one, and empties
// the batch.
func (b *ewmaBatch) fold(avg *atomic.Int64) {
	if b.n == 0 {
		return
	}
	foldInto(avg, b.sum/time.Duration(b.n), b.n)
	b.sum, b.n = 0, 0
}

// foldInto moves avg as n runs that each took mean would, by
// compare-and-swap: every worker folds into it.
func foldInto(avg *atomic.Int64, mean time.Duration, n int) {
	for {
		old := avg.Load()
		if avg.CompareAndSwap(old, int64(foldAverage(time.Duration(old), mean, n))) {
			return
		}
	}
}

// foldAverage is the exponentially weighted average after n runs that
// each took mean: a sixteenth of the way towards each, from avg (or from
// the first run, when nothing is averaged yet).
func foldAverage(avg, mean time.Duration, n int) time.Duration {
	if avg == 0 {
		avg = mean
	}
	for range n {
		avg += (mean - avg) / 16
	}
	return avg
}

func (c *counters) setLastError(err error) {
	msg := err.Error()
	c.lastError.Store(&msg)
}

// snapshot copies the counters; consumer figures are filled in by the caller.
func (c *counters) snapshot(function string) wire.Stats {
	s := wire.Stats{
		Function:           function,
		Retried:            c.retried.Load(),
		Termed:             c.termed.Load(),
		DeadLettered:       c.deadLettered.Load(),
		DeadLetterFailures: c.deadLetterFailures.Load(),
		Redeliveries:       c.redeliveries.Load(),
		Heartbeats:         c.heartbeats.Load(),
		BufferBeats:        c.bufferBeats.Load(),

		DuplicateOutputs: c.duplicateOutputs.Load(),
		Abandoned:        c.abandoned.Load(),
		AbandonedRunning: c.abandonedRunning.Load(),
		TicksSkipped:     c.ticksSkipped.Load(),
	}
	if p := c.lastError.Load(); p != nil {
		s.LastError = *p
	}
	for i := range c.perWorker {
		w := &c.perWorker[i]
		ended := w.ended.Load() // before started, so the difference is never negative
		s.Handled += w.handled.Load()
		s.Acked += w.acked.Load()
		s.InFlight += int64(w.started.Load() - ended)
	}
	s.AvgMillis, s.P50Millis, s.P99Millis = c.processingTimes()
	return s
}

// processingTimes are the average, median and p99 of every worker slot's
// window.
func (c *counters) processingTimes() (avg, p50, p99 float64) {
	window := make([]time.Duration, 0, len(c.perWorker)*len(c.perWorker[0].durations))
	for i := range c.perWorker {
		w := &c.perWorker[i]
		n := min(w.observed.Load(), uint64(len(w.durations)))
		for j := range n {
			window = append(window, time.Duration(w.durations[j].Load()))
		}
	}
	n := len(window)
	if n == 0 {
		return 0, 0, 0
	}
	slices.Sort(window)
	var sum time.Duration
	for _, d := range window {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return ms(sum / time.Duration(n)), ms(window[(n*50-1)/100]), ms(window[(n*99-1)/100])
}
