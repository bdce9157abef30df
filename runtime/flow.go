package runtime

// Flow control: how many messages a binding may pull and hold at once
// (credits), and how many of them may wait for a worker (prefetch).

import (
	"sync"
	"time"
)

// credits count the messages this binding may hold: asked for and not yet
// arrived (outstanding), or delivered and not yet settled. The puller takes
// credits before it pulls and asks for exactly as many messages as it took,
// so the client never holds more messages than concurrency plus the
// prefetch allowance. A message of a request given up on (a leadership
// change, a pull that went quiet) can still arrive; it is taken all the
// same and its credit counted, so the hold goes over the limit only for
// such a straggler.
type credits struct {
	mu          sync.Mutex
	cond        *sync.Cond
	inUse       int
	outstanding int
	closed      bool
	// waiter is the waiting take's rule, nil while nobody waits: a release
	// wakes the puller only when the rule would let it pull, not once per
	// settled message.
	waiter *creditRule
	// drainWaiters count the awaitNoOutstanding calls waiting: the last
	// arrival of a request wakes them.
	drainWaiters int
	// wakeOnArrival makes the last arrival wake a waiting take too, for a
	// rule that waits for no request to be outstanding. Set before the
	// first take.
	wakeOnArrival bool
}

// creditRule is what take waits for: enough free credits under limit.
type creditRule struct {
	limit  func() int
	enough func(free, limit, outstanding int) bool
}

// met reports whether the rule lets a take go ahead now. Called with mu held.
func (c *credits) met(r *creditRule) (n int, ok bool) {
	l := r.limit()
	n = l - c.inUse
	return n, n > 0 && r.enough(n, l, c.outstanding)
}

func newCredits() *credits {
	c := &credits{}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// take waits until enough credits are free, then takes every free one up
// to limit() for a pull request. It returns 0 once the credits are closed.
// limit is read again after every release, so a prefetch allowance that
// changes with the measured handling rate takes effect at once; enough lets
// the caller batch refills instead of pulling for every single freed
// credit.
func (c *credits) take(limit func() int, enough func(free, limit, outstanding int) bool) int {
	rule := &creditRule{limit: limit, enough: enough}
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.closed {
		if n, ok := c.met(rule); ok {
			c.inUse += n
			c.outstanding += n
			return n
		}
		c.waiter = rule
		c.cond.Wait()
		c.waiter = nil
	}
	return 0
}

// close ends the pulling: take returns 0 from now on.
func (c *credits) close() {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
}

// arrived moves one credit from outstanding to delivered. The last
// arrival wakes the drain's wait, and with wakeOnArrival a take waiting
// for nothing to be outstanding (a rate-limited binding's).
func (c *credits) arrived() {
	c.mu.Lock()
	if c.outstanding > 0 {
		c.outstanding--
		if c.outstanding == 0 && (c.drainWaiters > 0 || c.wakeOnArrival && c.waiter != nil) {
			c.cond.Broadcast()
		}
	} else {
		c.inUse++ // a straggler of a request given up on
	}
	c.mu.Unlock()
}

// giveBack returns up to n outstanding credits: messages a request will
// not deliver.
func (c *credits) giveBack(n int) {
	c.mu.Lock()
	n = min(n, c.outstanding)
	c.outstanding -= n
	c.inUse -= n
	c.cond.Broadcast()
	c.mu.Unlock()
}

// release frees the credits of n settled or returned messages.
func (c *credits) release(n int) {
	if n < 0 {
		return
	}
	c.mu.Lock()
	c.inUse -= n
	if c.waiter != nil {
		if _, ok := c.met(c.waiter); ok {
			c.cond.Broadcast()
		}
	}
	c.mu.Unlock()
}

func (c *credits) outstandingCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outstanding
}

// awaitNoOutstanding waits until no request is outstanding, or timeout.
func (c *credits) awaitNoOutstanding(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	t := time.AfterFunc(timeout, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer t.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainWaiters++
	defer func() { c.drainWaiters-- }()
	for c.outstanding > 0 && time.Now().Before(deadline) {
		c.cond.Wait()
	}
}

// limitRaised wakes a take waiting for credits after its limit grew: a
// worker's place left empty is filled again (workers.reclaim).
func (c *credits) limitRaised() { c.release(0) }

// pullLimit is how many messages may be delivered and unsettled at once
// with live workers: none while every worker's place is left empty by an
// abandoned handler (workers.abandon).
func (b *binding) pullLimit(live int) int {
	if live <= 0 {
		return 0
	}
	return live + b.prefetch()
}

// DefaultMaxPrefetch caps the derived prefetch allowance; it is nats.go's
// own default buffer for Consume.
const DefaultMaxPrefetch = 500

// maxPrefetch is the most messages the buffer may hold beyond the workers.
func (b *binding) maxPrefetch() int {
	if b.spec.Prefetch != nil {
		return *b.spec.Prefetch
	}
	return DefaultMaxPrefetch
}

// prefetch is the current allowance for messages waiting for a worker. A
// manifest value is used as is. Otherwise it is derived from the measured
// handling rate so that the last buffered message is expected to wait about
// a quarter of ackWait, well under the half that the issue asks for, and the
// buffer keeper's heartbeats cover the rest. Before anything is measured the
// allowance equals concurrency.
func (b *binding) prefetch() int {
	if b.spec.Prefetch != nil {
		return *b.spec.Prefetch
	}
	avg := b.stats.recentAverage()
	if avg <= 0 {
		return b.spec.Concurrency
	}
	perSecond := float64(b.spec.Concurrency) / avg.Seconds()
	n := int(perSecond * (b.spec.AckWait / 4).Seconds())
	return min(max(n, 0), DefaultMaxPrefetch)
}

// recentAverage is an exponentially weighted average of processing times,
// cheap enough to read before every pull.
func (c *counters) recentAverage() time.Duration {
	return time.Duration(c.ewma.Load())
}
