package runtime

// handoff is how a pulled delivery reaches a worker. While the buffer is
// empty the puller hands each delivery straight to a worker and, when every
// worker is busy, waits for the first to come back, as nats.go's Consume
// does; only a delivery that has waited there is put in the buffer, and
// while the buffer holds anything every delivery goes behind it.
//
// Waiting matters for speed: a worker that comes back to a waiting puller
// takes its next message without parking, so the acks of several messages
// leave in one write. Buffering every delivery at once made half as many
// acks per write at concurrency 16 (issue 16: 0.48 write system calls a
// message against Consume's 0.23).
//
// The wait is bounded, because while the puller waits the messages behind
// it sit in nats.go's queue, where neither the keeper nor the pull watch
// sees them: every tick of either ends the wait (release), and the waiting
// delivery, already in the unsettled set and kept alive, goes to the
// buffer. So a message is unseen for at most one keeper tick (a quarter of
// its heartbeat) or one pull-watch tick (pullHeartbeat/2), whichever comes
// first, before its keep-alive clock starts.
type handoff struct {
	// buffer holds the deliveries that found every worker busy: at most
	// concurrency plus the prefetch allowance, so a give never blocks on it.
	buffer chan *delivery
	// direct is unbuffered: a send completes only as a worker takes it.
	direct chan *delivery
	// spill is unbuffered: a receive ends the puller's wait on direct.
	spill chan struct{}
}

func newHandoff(capacity int) *handoff {
	return &handoff{buffer: make(chan *delivery, capacity),
		direct: make(chan *delivery), spill: make(chan struct{})}
}

// give hands d to a worker, or to the buffer once the wait for one is
// released or the run is stopping (the workers return what they take
// then). Only the puller gives, so while it waits on direct the buffer is
// empty and order is kept.
func (h *handoff) give(d *delivery, stopping <-chan struct{}) {
	if len(h.buffer) == 0 {
		select {
		case h.direct <- d: // a worker was waiting
			return
		default:
		}
		select {
		case h.direct <- d:
			return
		case <-h.spill:
		case <-stopping:
		}
	}
	h.buffer <- d
}

// take waits for the next delivery; false once the buffer is closed.
func (h *handoff) take() (*delivery, bool) {
	select {
	case d, ok := <-h.buffer:
		return d, ok
	case d := <-h.direct:
		return d, true
	}
}

// release ends a give that waits for a worker, if one does.
func (h *handoff) release() {
	select {
	case h.spill <- struct{}{}:
	default:
	}
}

// buffered is how many deliveries wait in the buffer.
func (h *handoff) buffered() int { return len(h.buffer) }

// close ends the workers' takes once the buffer is empty. Nothing gives
// after it: the puller's subscription has ended.
func (h *handoff) close() { close(h.buffer) }
