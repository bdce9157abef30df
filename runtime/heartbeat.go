package runtime

import (
	"sync"
	"time"
)

// heartbeat keeps one running message alive. InProgress resets the server's
// ack-wait timer, so a handler that runs longer than ackWait is not
// redelivered to another worker while it is still working. A timer (not a
// goroutine) per message keeps the cost near zero for short handlers, which
// finish before the first beat.
type heartbeat struct {
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// startHeartbeat calls beat every interval until stop is called.
func startHeartbeat(interval time.Duration, beat func()) *heartbeat {
	h := &heartbeat{}
	// Held until the timer is stored: a short interval can fire first.
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timer = time.AfterFunc(interval, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.stopped {
			return
		}
		beat()
		h.timer.Reset(interval)
	})
	return h
}

// stop ends the beats; once it returns, beat is not called again, so an
// InProgress can never follow the message's ack.
func (h *heartbeat) stop() {
	h.mu.Lock()
	h.stopped = true
	h.timer.Stop()
	h.mu.Unlock()
}
