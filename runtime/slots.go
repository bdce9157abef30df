package runtime

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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
)

// delivery is one message between its pull and its settlement. Its state
// moves by compare-and-swap only, so a message is settled once: by its
// handler or by the drain, never both.
type delivery struct {
	msg      jetstream.Msg
	state    atomic.Int32
	lastBeat time.Time // guarded by tracker.mu; when the message was last kept alive
}

func (d *delivery) move(from, to deliveryState) bool {
	return d.state.CompareAndSwap(int32(from), int32(to))
}

// tracker holds every delivery not yet settled, for the buffer keeper and
// for the drain.
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

// start moves a buffered delivery to running; false if the drain took it.
func (t *tracker) start(d *delivery) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	d.lastBeat = time.Now()
	return d.move(stateBuffered, stateRunning)
}

// finish moves a running delivery to settled; false if the drain returned
// it. It takes the lock that beat holds while it sends, so no InProgress
// can follow the message's ack or nak.
func (t *tracker) finish(d *delivery) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return d.move(stateRunning, stateSettled)
}

// beat sends InProgress for every running delivery last beaten at least
// runningEvery ago and every buffered one last beaten at least
// bufferedEvery ago (never, if bufferedEvery is 0). It reports how many of
// each it sent.
func (t *tracker) beat(runningEvery, bufferedEvery time.Duration) (running, buffered int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for d := range t.m {
		var due bool
		switch deliveryState(d.state.Load()) {
		case stateRunning:
			due = now.Sub(d.lastBeat) >= runningEvery
		case stateBuffered:
			due = bufferedEvery > 0 && now.Sub(d.lastBeat) >= bufferedEvery
		}
		if !due || d.msg.InProgress() != nil {
			continue
		}
		if deliveryState(d.state.Load()) == stateRunning {
			running++
		} else {
			buffered++
		}
		d.lastBeat = now
	}
	return running, buffered
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
