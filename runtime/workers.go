package runtime

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// workers are a binding's `concurrency` handler goroutines. A handler that
// outlives the function's timeout and ignores its cancelled context cannot
// be stopped, so its worker is replaced rather than waited for: the keeper
// settles the message as a failure and starts a new worker, and the old
// goroutine exits on its own if its handler ever returns.
type workers struct {
	b *binding
	// stopping ends with the binding's run: no new message starts after it.
	stopping context.Context
	// handlerCtx outlives stopping, so a drain does not cancel work.
	handlerCtx context.Context
	handoff    *handoff
	credits    *credits
	wg         sync.WaitGroup
	// retired counts worker slots left empty because abandoned handlers
	// already hold as many goroutines as the function has workers
	// (abandon): each comes back when one of those handlers returns.
	retired atomic.Int32
}

// worker is one handler goroutine: its share of the wait group, the
// abandonment deadline of its running message, and its counters. A worker
// runs one handler at a time, and one whose handler was abandoned takes no
// other message, so the deadline need not be in every delivery.
type worker struct {
	// once frees the worker's share of wg when the worker returns or when
	// its handler is abandoned, whichever comes first.
	once sync.Once
	wg   *sync.WaitGroup
	// deadline is when the keeper abandons the running handler (zero:
	// never). unsettledSet.start writes it before the delivery is
	// running; the keeper reads it, under the unsettledSet's lock, only
	// while it is.
	deadline time.Time
	// stats is the worker's slot of the function's counters; a
	// replacement takes over the slot of the worker it replaces.
	stats *workerCounters
	// recent gathers its processing times for the function's average.
	recent ewmaBatch
	// deadline and recent are written for every message: no other
	// worker's on their lines (workers are allocated side by side).
	_ [128]byte
}

func (wk *worker) free() { wk.once.Do(wk.wg.Done) }

// pastDeadline reports whether the running handler outlived its deadline.
func (wk *worker) pastDeadline(now time.Time) bool {
	return !wk.deadline.IsZero() && now.After(wk.deadline)
}

// start runs one more worker, counting in slot.
func (w *workers) start(slot int) {
	w.reserve()
	w.run(nil, w.b.stats.slot(slot), true)
}

// reserve counts a worker about to start, before anything can make the
// wait group reach zero.
func (w *workers) reserve() { w.wg.Add(1) }

// run starts a reserved worker counting in stats. Given an abandoned
// delivery, the worker first settles it as a timed-out attempt, then takes
// messages like any other, or (take false, a retired slot) ends there.
func (w *workers) run(abandoned *delivery, stats *workerCounters, take bool) {
	wk := &worker{wg: &w.wg, stats: stats}
	go func() {
		defer wk.free()
		if abandoned != nil {
			msg, err := w.b.metaOf(abandoned), fmt.Errorf("%w: handler still running after its timeout of %s",
				ErrHandlerTimeout, w.b.spec.Timeout)
			w.b.settle(abandoned.msg, msg, err, abandoned.countedAttempt(msg))
			w.b.recordRun(abandoned, msg, time.Now().Add(-w.b.spec.Timeout), w.b.spec.Timeout, err) // console: recent runs
			w.done(abandoned)
		}
		if take {
			w.loop(wk)
		}
	}()
}

// wait waits for every worker (not for abandoned handlers) up to timeout.
func (w *workers) wait(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// abandon gives up on a handler past its deadline: it stops being kept
// alive (the keeper moved it to stateAbandoned), a new worker settles it
// as a failure and takes its place. The keeper reserved the replacement
// while it held the unsettledSet's lock, before the old worker could see the
// abandonment and return, so the wait group never touches zero between.
func (w *workers) abandon(d *delivery) {
	w.b.stats.abandoned.Add(1)
	running := w.b.stats.abandonedRunning.Add(1)
	log := w.b.msgLog(w.b.metaOf(d))
	if running > int64(w.b.spec.Concurrency) {
		// Abandoned handlers hold as many goroutines as the function has
		// workers already: no more replacements, and the pull shrinks with
		// the workers left (pullLimit), so a handler that hangs on every
		// message cannot leak goroutines and hold messages without bound.
		w.retired.Add(1)
		log.Error("handler ignored its cancelled context past the timeout; settled its message as a failure, and left "+
			"its worker's place empty until an abandoned handler returns", "timeout", w.b.spec.Timeout,
			"abandoned_running", running, "workers_left", w.b.spec.Concurrency-int(w.retired.Load()))
		w.run(d, d.worker.stats, false)
	} else {
		log.Error("handler ignored its cancelled context past the timeout; settled its message as a failure and replaced its worker",
			"timeout", w.b.spec.Timeout)
		w.run(d, d.worker.stats, true)
	}
	d.worker.free()
}

// reclaim takes back a retired slot, if there is one, for a worker whose
// abandoned handler returned.
func (w *workers) reclaim() bool {
	for {
		n := w.retired.Load()
		if n == 0 {
			return false
		}
		if w.retired.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// live is how many worker slots are filled.
func (w *workers) live() int { return w.b.spec.Concurrency - int(w.retired.Load()) }

// pass waits for a place under the function's concurrency when its
// partitions share one (binding.gate): false if the binding stops first.
// The delivery waits buffered meanwhile, kept alive by the keeper.
func (w *workers) pass() bool {
	if w.b.gate == nil {
		return true
	}
	select {
	case w.b.gate <- struct{}{}:
		return true
	case <-w.stopping.Done():
		return false
	}
}

// leave frees the place pass took.
func (w *workers) leave() {
	if w.b.gate != nil {
		<-w.b.gate
	}
}
