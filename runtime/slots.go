package runtime

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/nats-io/nats.go/jetstream"
)

// deliveryState is where one delivered message is in its life.
type deliveryState int32

const (
	// stateBuffered: pulled, waiting for a free worker.
	stateBuffered deliveryState = iota
	// stateRunning: a handler has it.
	stateRunning
	// stateSettled: acked, nak'd or dead-lettered by its handler.
	stateSettled
	// stateReturned: given back with a Nak by the drain.
	stateReturned
	// stateAbandoned: its handler outlived the function's timeout; the
	// message is settled as a failure without waiting for it.
	stateAbandoned
)

// delivery is one message between its pull and its settlement. Its state
// moves by compare-and-swap only, so a message is settled once: by its
// handler, by the keeper that abandons it, or by the drain, never twice.
type delivery struct {
	msg   jetstream.Msg
	state atomic.Int32
	// Guarded by tracker.mu. lastBeat is when the server's ack-wait timer
	// was last reset: the pull, then every InProgress. The rest is set
	// when a worker starts it.
	lastBeat time.Time
	deadline time.Time
	meta     jetfn.Msg
	slot     *slot
}

func (d *delivery) move(from, to deliveryState) bool {
	return d.state.CompareAndSwap(int32(from), int32(to))
}

// tracker holds every delivery not yet settled, for the keeper and for the
// drain.
type tracker struct {
	mu sync.Mutex
	m  map[*delivery]struct{}
}

func (t *tracker) add(m jetstream.Msg) *delivery {
	d := &delivery{msg: m, lastBeat: time.Now()}
	t.mu.Lock()
	if t.m == nil {
		t.m = map[*delivery]struct{}{}
	}
	t.m[d] = struct{}{}
	t.mu.Unlock()
	return d
}

func (t *tracker) remove(d *delivery) {
	t.mu.Lock()
	delete(t.m, d)
	t.mu.Unlock()
}

// start moves a buffered delivery to running on worker s, to be abandoned
// after deadline (never, if zero); false if the drain took it. It leaves
// lastBeat alone: the server's timer has run since the last InProgress,
// whatever the worker does, so the keeper must beat it on that clock.
func (t *tracker) start(d *delivery, meta jetfn.Msg, deadline time.Time, s *slot) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	d.meta, d.deadline, d.slot = meta, deadline, s
	return d.move(stateBuffered, stateRunning)
}

// finish moves a running delivery to settled; false if the drain returned
// it or the keeper abandoned it. It takes the lock that keep holds while it
// sends, so no InProgress can follow the message's ack or nak.
func (t *tracker) finish(d *delivery) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return d.move(stateRunning, stateSettled)
}

// keepResult is what one pass of keep did.
type keepResult struct {
	running, buffered int
	// overdue are running deliveries past their deadline, now abandoned:
	// the caller settles them and replaces their workers.
	overdue []*delivery
}

// keep sends InProgress for every held delivery whose server timer was
// last reset at least `every` ago (buffered ones only if beatBuffered), and
// abandons every running one past its deadline instead of beating it,
// calling reserve for each while the lock still keeps its worker from
// seeing that it was abandoned.
func (t *tracker) keep(every time.Duration, beatBuffered bool, reserve func()) keepResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	var res keepResult
	now := time.Now()
	for d := range t.m {
		state := deliveryState(d.state.Load())
		if state == stateRunning && !d.deadline.IsZero() && now.After(d.deadline) && d.move(stateRunning, stateAbandoned) {
			reserve()
			res.overdue = append(res.overdue, d)
			continue
		}
		due := now.Sub(d.lastBeat) >= every &&
			(state == stateRunning || state == stateBuffered && beatBuffered)
		if !due || d.msg.InProgress() != nil {
			continue
		}
		if state == stateRunning {
			res.running++
		} else {
			res.buffered++
		}
		d.lastBeat = now
	}
	return res
}

// returnAll Naks, without delay, every delivery in state `from`, so another
// instance can take it at once. It returns how many it returned.
func (t *tracker) returnAll(from deliveryState, log *slog.Logger) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for d := range t.m {
		if !d.move(from, stateReturned) {
			continue
		}
		if err := d.msg.Nak(); err != nil {
			log.Warn("returning a message", "err", err)
			continue
		}
		n++
	}
	return n
}

func (t *tracker) count(state deliveryState) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for d := range t.m {
		if deliveryState(d.state.Load()) == state {
			n++
		}
	}
	return n
}
