package runtime

import "sync/atomic"

// handoff is how a pulled delivery reaches a worker. While the buffer is
// empty and fewer messages than workers wait behind it, the puller of a
// function with several workers hands a delivery straight to a worker and,
// when every worker is busy, waits for the first to come back, as nats.go's
// Consume does. Otherwise, or once that wait is released, the delivery goes
// to the buffer, and while the buffer holds anything every delivery goes
// behind it.
//
// Waiting matters for speed: a worker that comes back to a waiting puller
// takes its next message without parking, so the acks of several messages
// leave in one write. Buffering every delivery at once sent about two acks
// a write at concurrency 16 where Consume sends four (issue 16: 0.48 write
// system calls a message against 0.23; 0.24 against 0.23 with the wait).
// With as many messages waiting behind as there are workers (a backlog),
// no worker will park soon anyway, and waiting would only cost two
// goroutine switches a message: waiting on every message, a backlog of
// 20,000 drained at concurrency 1 took 1.20× raw's CPU a message; with the
// backlog buffered, 1.04×. A single worker gains nothing from the wait
// either (noop c=1: 0.68–0.70 writes a message with it, raw's 0.69) and
// pays the same switches: 1.18× raw's CPU in the budget c=1 P=1 row with
// it, 0.97× without (and 1.16 writes a message, against 0.69 without: the
// message that waits is not in the buffer, so the puller's "nothing
// buffered" refill sends more requests).
//
// The wait is bounded, because while the puller waits the messages behind
// it sit in nats.go's queue, where neither the keeper nor the pull watch
// sees them. Every tick of either releases the handoff: a waiting delivery,
// already in the unsettled set and kept alive, goes to the buffer, and so
// does every delivery after it until one arrives with nothing queued
// behind it, so none of those that queued during the waits waits again.
// So a message is unseen for at most one keeper tick (a quarter of its
// heartbeat) or one pull-watch tick (pullHeartbeat/2), whichever comes
// first, and its first InProgress lands within 1.25 heartbeats of its
// delivery: at most 5/8 of ackWait, since heartbeat is at most half.
type handoff struct {
	// buffer holds the deliveries that found every worker busy. It holds
	// concurrency plus the prefetch allowance, all the credits allow, so a
	// give blocks on it only for stragglers of a request given up on
	// (credits), and only until the run is stopping.
	buffer chan *delivery
	// direct is unbuffered: a send completes only as a worker takes it.
	direct chan *delivery
	// spill is unbuffered: a receive ends the puller's wait on direct.
	spill chan struct{}
	// flush, set by release, buffers every delivery until one comes with
	// nothing queued behind it.
	flush atomic.Bool
	// workers is the binding's concurrency: with that many messages behind
	// a delivery, or with a single worker, it is buffered without waiting.
	workers int
}

func newHandoff(capacity, workers int) *handoff {
	return &handoff{buffer: make(chan *delivery, capacity),
		direct: make(chan *delivery), spill: make(chan struct{}), workers: workers}
}

// give hands d to a worker, or to the buffer, in this order:
//   - after a release, to the buffer, until a delivery comes with nothing
//     behind it;
//   - while the buffer is empty, to a worker already waiting;
//   - while the buffer is empty, with several workers and fewer messages
//     behind d than workers, to the first worker that comes back, unless
//     the wait is released or the run is stopping (the workers return what
//     they take then);
//   - else to the buffer.
//
// behind counts the messages queued after d; it is asked only where the
// order above needs it, as it takes the subscription's lock. Only the
// puller gives, so while it waits on direct the buffer is empty and order
// is kept. give reports false only for a delivery it did not place: the
// buffer was full (stragglers) and the run is stopping, so the caller must
// return it.
func (h *handoff) give(d *delivery, stopping <-chan struct{}, behind func(*delivery) int) bool {
	if h.flush.Load() {
		if behind(d) <= 0 {
			h.flush.Store(false) // what queued before the release is through
		}
		return h.bufferOrStop(d, stopping)
	}
	if len(h.buffer) == 0 {
		select {
		case h.direct <- d: // a worker was waiting
			return true
		default:
		}
		if h.workers > 1 && behind(d) < h.workers {
			select {
			case h.direct <- d:
				return true
			case <-h.spill:
			case <-stopping:
			}
		}
	}
	return h.bufferOrStop(d, stopping)
}

// bufferOrStop buffers d, waiting while the buffer is full until the run is
// stopping: no send may still wait once the puller has stopped, since the
// buffer is closed then (a send that waited on it panicked, in the middle
// of the drain).
func (h *handoff) bufferOrStop(d *delivery, stopping <-chan struct{}) bool {
	select {
	case h.buffer <- d:
		return true
	default:
	}
	select {
	case h.buffer <- d:
		return true
	case <-stopping:
		return false
	}
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

// release ends a give that waits for a worker, if one does, and buffers
// the deliveries after it until the queue behind them is empty.
func (h *handoff) release() {
	h.flush.Store(true)
	select {
	case h.spill <- struct{}{}:
	default:
	}
}

// buffered is how many deliveries wait in the buffer.
func (h *handoff) buffered() int { return len(h.buffer) }

// close ends the workers' takes once the buffer is empty. Nothing may give
// after it: it is called once the puller's subscription has ended (stop
// waits a pull's wait for its last callback).
func (h *handoff) close() { close(h.buffer) }
