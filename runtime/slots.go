package runtime

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// slots counts free workers. A pull asks for exactly as many messages as
// there are free slots.
type slots chan struct{}

func newSlots(n int) slots { return make(slots, n) }

// reserve blocks until at least one worker is free, then takes every free
// one. It returns 0 once ctx is done.
func (s slots) reserve(ctx context.Context) int {
	select {
	case <-ctx.Done():
		return 0
	case s <- struct{}{}:
	}
	n := 1
	for n < cap(s) {
		select {
		case s <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func (s slots) release(n int) {
	for range n {
		<-s
	}
}

// delivery is one message being handled; claim makes sure it is settled
// once, by its handler or by the drain, never both.
type delivery struct {
	msg     jetstream.Msg
	claimed atomic.Bool
}

func (d *delivery) claim() bool { return d.claimed.CompareAndSwap(false, true) }

// inflightSet tracks the deliveries being handled, for the drain.
type inflightSet struct {
	mu sync.Mutex
	m  map[*delivery]struct{}
}

func (s *inflightSet) add(m jetstream.Msg) *delivery {
	d := &delivery{msg: m}
	s.mu.Lock()
	if s.m == nil {
		s.m = map[*delivery]struct{}{}
	}
	s.m[d] = struct{}{}
	s.mu.Unlock()
	return d
}

func (s *inflightSet) remove(d *delivery) {
	s.mu.Lock()
	delete(s.m, d)
	s.mu.Unlock()
}

// returnAll Naks, without delay, every delivery not yet settled, so another
// instance can take it at once. It returns how many it returned.
func (s *inflightSet) returnAll(log *slog.Logger) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for d := range s.m {
		if !d.claim() {
			continue
		}
		if err := d.msg.Nak(); err != nil {
			log.Warn("returning an in-flight message", "err", err)
			continue
		}
		n++
	}
	return n
}
