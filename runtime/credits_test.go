package runtime

import (
	"testing"
	"time"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestCreditsTakeWaitsForItsRule: a release wakes the waiting take only
// when the rule lets it pull, and then it takes every free credit. A
// release that does not meet the rule must not lose the wake-up of the one
// that does.
func TestCreditsTakeWaitsForItsRule(t *testing.T) {
	c := newCredits()
	limit := func() int { return 4 }
	halfFree := func(free, limit, _ int) bool { return 2*free >= limit }
	if n := c.take(limit, halfFree); n != 4 {
		t.Fatalf("first take = %d, want all 4 credits", n)
	}
	for range 4 {
		c.arrived()
	}
	got := make(chan int, 1)
	go func() { got <- c.take(limit, halfFree) }()
	runtimetest.Eventually(t, 10*time.Second, "the take to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.waiter != nil
	})
	c.release(1) // 1 of 4 free: not enough
	c.mu.Lock()
	inUse, waiting := c.inUse, c.waiter != nil
	c.mu.Unlock()
	if inUse != 3 || !waiting {
		t.Fatalf("after one release: %d in use, taker waiting %v; want 3 and still waiting", inUse, waiting)
	}
	c.release(1) // 2 of 4 free: half
	select {
	case n := <-got:
		if n != 2 {
			t.Fatalf("take = %d, want the 2 free credits", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("take still waits with half the credits free")
	}
}

// TestCreditsCloseWakesTheTaker: a shutdown must not leave the puller
// waiting for credits that will never be released.
func TestCreditsCloseWakesTheTaker(t *testing.T) {
	c := newCredits()
	limit := func() int { return 1 }
	never := func(int, int, int) bool { return false }
	got := make(chan int, 1)
	go func() { got <- c.take(limit, never) }()
	runtimetest.Eventually(t, 10*time.Second, "the take to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.waiter != nil
	})
	c.close()
	select {
	case n := <-got:
		if n != 0 {
			t.Fatalf("take after close = %d, want 0", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("take still waits after close")
	}
}

// TestCreditsLastArrivalEndsTheWaitForOutstanding: a drain waits until no
// pull request is outstanding. When a request's last message arrives (no
// status follows a request that delivered in full), that wait must end
// then, not at its timeout: releases no longer wake every waiter.
func TestCreditsLastArrivalEndsTheWaitForOutstanding(t *testing.T) {
	c := newCredits()
	if n := c.take(func() int { return 2 }, func(int, int, int) bool { return true }); n != 2 {
		t.Fatalf("take = %d, want 2", n)
	}
	c.arrived()
	done := make(chan struct{})
	go func() {
		c.awaitNoOutstanding(time.Hour)
		close(done)
	}()
	runtimetest.Eventually(t, 10*time.Second, "the drain to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.drainWaiters == 1
	})
	c.arrived() // the request's last message
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting for outstanding requests after the last message arrived")
	}
}
