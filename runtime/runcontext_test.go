package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRunContext: the handler's context is done at its deadline, when its
// parent is cancelled, and for contexts derived from it, as a
// context.WithTimeout would be. Pure logic: the keeper's tick is called by
// hand.
func TestRunContext(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		var c runContext
		c.reset(context.Background(), time.Now().Add(-time.Millisecond), 3)
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err past the deadline = %v", err)
		}
		if n := numDelivered(&c); n != 3 {
			t.Errorf("delivery count = %d, want 3", n)
		}
	})
	t.Run("the keeper's tick closes Done", func(t *testing.T) {
		var c runContext
		c.reset(context.Background(), time.Now().Add(time.Hour), 1)
		done := c.Done()
		c.cancelIfLate(time.Now())
		select {
		case <-done:
			t.Fatal("done before the deadline")
		default:
		}
		c.cancelIfLate(time.Now().Add(2 * time.Hour))
		<-done
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", c.Err())
		}
	})
	t.Run("parent cancelled, and a derived context follows", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		var c runContext
		c.reset(parent, time.Time{}, 1)
		child, stop := context.WithTimeout(&c, time.Hour)
		defer stop()
		cancel()
		<-c.Done()
		<-child.Done()
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
			t.Fatalf("Err = %v, child %v; want both cancelled", c.Err(), child.Err())
		}
		c.end()
	})
	t.Run("ends when the handler returns, and starts afresh", func(t *testing.T) {
		var c runContext
		c.reset(context.Background(), time.Time{}, 1)
		leftBehind := c.Done()
		c.end()
		select {
		case <-leftBehind:
		default:
			t.Fatal("Done still open after the handler returned")
		}
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err after the handler returned = %v, want Canceled", c.Err())
		}
		c.reset(context.Background(), time.Time{}, 2)
		if c.Err() != nil || numDelivered(&c) != 2 {
			t.Fatalf("next run: Err %v, delivery count %d; want a fresh context", c.Err(), numDelivered(&c))
		}
	})
	t.Run("Done after the handler returned watches no parent", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		var c runContext
		c.reset(parent, time.Time{}, 1)
		c.end()
		<-c.Done() // asked by a goroutine the handler left behind
		if c.stopWatching != nil {
			t.Fatal("Done after the run ended registered an AfterFunc on the parent that nothing stops")
		}
	})
	t.Run("no timeout, no deadline", func(t *testing.T) {
		var c runContext
		c.reset(context.Background(), time.Time{}, 1)
		if _, ok := c.Deadline(); ok || c.Err() != nil {
			t.Fatalf("Deadline ok %v, Err %v; want neither", ok, c.Err())
		}
	})
}
