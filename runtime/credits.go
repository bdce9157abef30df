package runtime

import (
	"context"
	"sync"
)

// credits count delivered-but-unsettled messages. The puller takes credits
// before it pulls and asks for exactly as many messages as it took, so the
// client never holds more messages than concurrency plus the prefetch
// allowance.
type credits struct {
	mu    sync.Mutex
	cond  *sync.Cond
	inUse int
}

func newCredits() *credits {
	c := &credits{}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// take waits until enough credits are free, then takes every free one up
// to limit(). It returns 0 once ctx is done. limit is read again after
// every release, so a prefetch allowance that changes with the measured
// handling rate takes effect at once; enough lets the caller batch refills
// instead of pulling for every single freed credit.
func (c *credits) take(ctx context.Context, limit func() int, enough func(free, limit int) bool) int {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for ctx.Err() == nil {
		l := limit()
		if n := l - c.inUse; n > 0 && enough(n, l) {
			c.inUse += n
			return n
		}
		c.cond.Wait()
	}
	return 0
}

func (c *credits) release(n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	c.inUse -= n
	c.cond.Broadcast()
	c.mu.Unlock()
}
