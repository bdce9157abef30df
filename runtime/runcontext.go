package runtime

import (
	"context"
	"slices"
	"sync"
	"time"
)

// runContext is the context a handler runs with. It lives inside the
// message's delivery, so a handler run allocates no context, timer or
// parent registration (context.WithTimeout costs about five allocations
// per message): its Done channel is made, and the parent watched, only
// when the handler asks for them.
//
// It is done when the function's timeout has passed (the keeper cancels it
// on its tick, a quarter of the heartbeat or timeout at most; Err reports
// the deadline at once), when its parent (the binding's handler context,
// cancelled by a drain that timed out) is done, or when the handler
// returns, as an HTTP request's context is: the message is settled then,
// so work the handler left behind must not go on in its name. It carries
// the delivery count and the run's outputs for the Publisher.
type runContext struct {
	parent       context.Context
	deadline     time.Time
	numDelivered uint64
	// traced is the run's span context (tracing.go), asked before the
	// parent; nil when tracing is off.
	traced context.Context
	// outputs are what the run published, for its Run (runs.go).
	outputs runOutputs

	mu           sync.Mutex
	done         chan struct{}
	err          error
	after        []*func()
	stopWatching func() bool
}

var _ context.Context = (*runContext)(nil)

// reset readies c for one handler run; deadline is zero for no timeout.
// It takes no lock, as it runs for every message: nothing else may hold c
// yet. A delivery's runContext is reset once, before its handler has it
// and before the keeper can see the delivery running (unsettledSet.start
// publishes both).
func (c *runContext) reset(parent context.Context, deadline time.Time, numDelivered uint64) {
	c.parent, c.deadline, c.numDelivered, c.traced = parent, deadline, numDelivered, nil
	c.done, c.err, c.after, c.stopWatching = nil, nil, nil, nil
}

// Deadline is the function's timeout for this run.
func (c *runContext) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Done is closed once the run is cancelled.
func (c *runContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		c.watchParent()
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

// Err is why the run is cancelled, or nil. A deadline that passed counts at
// once, before the keeper's tick closes Done.
func (c *runContext) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.parent.Err(); err != nil {
		c.cancel(err)
		return err
	}
	if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		c.cancel(context.DeadlineExceeded)
		return context.DeadlineExceeded
	}
	return nil
}

// Value answers the delivery count (deliveryKey), then the run's span
// (when traced), and asks the parent for anything else.
func (c *runContext) Value(key any) any {
	if _, ok := key.(deliveryKey); ok {
		return c.numDelivered
	}
	if _, ok := key.(runOutputsKey); ok { // console: recent runs
		return &c.outputs
	}
	if c.traced != nil {
		if v := c.traced.Value(key); v != nil {
			return v
		}
	}
	return c.parent.Value(key)
}

// AfterFunc lets contexts derived from this one (context.WithTimeout in a
// driver, say) follow its cancellation without a goroutine each.
func (c *runContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	c.watchParent()
	p := &f
	c.after = append(c.after, p)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.after, p)
		if i < 0 {
			return false
		}
		c.after = slices.Delete(c.after, i, i+1)
		return true
	}
}

// watchParent makes the parent's cancellation cancel c; c.mu is held. A
// run that ended watches nothing: a goroutine the handler left behind that
// asks for Done then would register on the binding's long-lived handler
// context an AfterFunc that nothing stops, one per such message.
func (c *runContext) watchParent() {
	if c.err == nil && c.stopWatching == nil && c.parent.Done() != nil {
		c.stopWatching = context.AfterFunc(c.parent, func() { c.cancel(c.parent.Err()) })
	}
}

// cancel ends the run with err, once; it reports whether this call did.
func (c *runContext) cancel(err error) bool {
	c.mu.Lock()
	after, ok := c.cancelLocked(err)
	c.mu.Unlock()
	runAfter(after)
	return ok
}

// cancelLocked sets err and closes Done unless c is cancelled already, and
// returns the AfterFunc functions to run once c.mu is released.
func (c *runContext) cancelLocked(err error) (after []*func(), ok bool) {
	if c.err != nil {
		return nil, false
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	after, c.after = c.after, nil
	return after, true
}

// runAfter starts the AfterFunc functions of a cancelled run, each on a
// goroutine of its own, as context.AfterFunc does.
func runAfter(after []*func()) {
	for _, f := range after {
		go (*f)()
	}
}

// cancelIfLate cancels the run once its deadline has passed, and reports
// whether this call cancelled it.
func (c *runContext) cancelIfLate(now time.Time) bool {
	return !c.deadline.IsZero() && !now.Before(c.deadline) && c.cancel(context.DeadlineExceeded)
}

// end ends the run once its handler returned: it cancels the context (a
// no-op if nobody asked for Done or derived from it) and stops watching
// the parent.
func (c *runContext) end() {
	c.mu.Lock() // once for both: it runs for every message
	after, _ := c.cancelLocked(context.Canceled)
	stop := c.stopWatching
	c.stopWatching = nil
	c.mu.Unlock()
	runAfter(after)
	if stop != nil {
		stop()
	}
}
