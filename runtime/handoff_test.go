package runtime

import (
	"testing"
	"time"

	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/nats-io/nats.go"
)

// TestHandoffReleaseBuffers: a give that waits for a worker ends when it is
// released, its delivery in the buffer; later gives go behind it, and
// workers take them in order.
func TestHandoffReleaseBuffers(t *testing.T) {
	h := newHandoff(4, 2)
	first, second := &delivery{}, &delivery{}
	gave := giveInBackground(h, first, nil, queued(0))
	runtimetest.Eventually(t, 5*time.Second, "the waiting give released", func() bool {
		h.release()
		select {
		case <-gave:
			return true
		default:
			return false
		}
	})
	if n := h.buffered(); n != 1 {
		t.Fatalf("buffered = %d after the release, want 1", n)
	}
	go h.give(second, nil, queued(0)) // behind the buffered one: it must not wait
	runtimetest.Eventually(t, 5*time.Second, "the second delivery buffered behind the first", func() bool {
		return h.buffered() == 2
	})
	for i, want := range []*delivery{first, second} {
		if d, ok := h.take(); !ok || d != want {
			t.Fatalf("take %d returned another delivery (ok %v)", i+1, ok)
		}
	}
}

// TestHandoffStopping: once the run is stopping a give buffers at once, for
// the workers to return, and closing ends the takes.
func TestHandoffStopping(t *testing.T) {
	h := newHandoff(1, 2)
	stopping := make(chan struct{})
	close(stopping)
	d := &delivery{}
	gaveWithin(t, giveInBackground(h, d, stopping, queued(0)), "the give waited for a worker although the run is stopping")
	h.close()
	if got, ok := h.take(); !ok || got != d {
		t.Fatal("the stopping give's delivery is not in the buffer")
	}
	if _, ok := h.take(); ok {
		t.Fatal("take after close and empty returned a delivery")
	}
}

// TestHandoffStoppingFullBuffer: a give blocked on a full buffer (a
// request's stragglers can fill it) ends once the run is stopping, so
// nothing is still sending when the buffer is closed: that send panicked
// and took the process down in the middle of its drain.
func TestHandoffStoppingFullBuffer(t *testing.T) {
	h := newHandoff(1, 2)
	first, second := &delivery{}, &delivery{}
	h.give(first, nil, queued(2)) // a backlog: buffered, and the buffer is full
	stopping := make(chan struct{})
	gave := giveInBackground(h, second, stopping, queued(2))
	close(stopping)
	if gaveWithin(t, gave, "the give blocked on a full buffer although the run is stopping") {
		t.Fatal("the give reported a delivery placed that it could not buffer")
	}
	h.close()
	if got, ok := h.take(); !ok || got != first {
		t.Fatal("the buffered delivery is gone")
	}
	if _, ok := h.take(); ok {
		t.Fatal("the give that found the buffer full buffered all the same")
	}
}

// TestHandoffWaitsForAWorker: a give that finds no worker waiting does not
// buffer: it waits until a worker takes the delivery from it.
func TestHandoffWaitsForAWorker(t *testing.T) {
	h := newHandoff(1, 2)
	d := &delivery{}
	gave := giveInBackground(h, d, nil, queued(0))
	got := takeDirect(t, h, "the give waiting for a worker")
	gaveWithin(t, gave, "the give did not return once a worker took its delivery")
	if got != d || h.buffered() != 0 {
		t.Fatalf("the worker got another delivery (%v), or %d buffered", got != d, h.buffered())
	}
}

// TestHandoffOneWorkerBuffers: with a single worker there is no waiting
// (it would cost switches and share no write), nor with a backlog of as
// many messages as workers behind the delivery.
func TestHandoffOneWorkerBuffers(t *testing.T) {
	for _, tt := range []struct {
		name            string
		workers, behind int
	}{
		{name: "one worker", workers: 1, behind: 0},
		{name: "a backlog behind", workers: 4, behind: 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandoff(1, tt.workers)
			go h.give(&delivery{}, nil, queued(tt.behind)) // no worker takes: a wait would never buffer
			runtimetest.Eventually(t, 5*time.Second, "the delivery buffered", func() bool {
				return h.buffered() == 1
			})
		})
	}
}

// TestHandoffReleaseFlushesTheQueue: after a release, even with no give
// waiting, every delivery goes to the buffer until one comes with nothing
// queued behind it, so none of those that queued during a wait waits
// again; after that one the handoff waits for a worker again.
func TestHandoffReleaseFlushesTheQueue(t *testing.T) {
	h := newHandoff(4, 4)
	h.release()
	for i, behind := range []int{2, 1, 0} {
		go h.give(&delivery{}, nil, queued(behind)) // would wait for a worker without the release
		runtimetest.Eventually(t, 5*time.Second, "the delivery buffered", func() bool {
			return h.buffered() == i+1
		})
	}
	for range 3 {
		h.take()
	}
	d := &delivery{}
	giveInBackground(h, d, nil, queued(0))
	if takeDirect(t, h, "the next give waiting for a worker") != d {
		t.Fatal("the worker got another delivery")
	}
}

// TestHandoffToAWaitingWorkerAsksNothing: a give that finds a worker
// waiting hands its delivery over without asking how many messages queue
// behind it (that takes the subscription's lock).
func TestHandoffToAWaitingWorkerAsksNothing(t *testing.T) {
	h := newHandoff(4, 2)
	taken := make(chan *delivery)
	go func() {
		for {
			d, ok := h.take()
			if !ok {
				return
			}
			taken <- d
		}
	}()
	defer h.close()
	// The worker is waiting again soon after each take; until then a give
	// asks, and waits for it.
	runtimetest.Eventually(t, 5*time.Second, "a give to a waiting worker that did not ask what is behind", func() bool {
		asked := false
		d := &delivery{}
		h.give(d, nil, func(*delivery) int { asked = true; return 0 })
		if <-taken != d {
			t.Fatal("the worker took another delivery")
		}
		return !asked
	})
}

// giveInBackground runs a give that may wait; the channel has its result
// once it returns.
func giveInBackground(h *handoff, d *delivery, stopping <-chan struct{}, behind func(*delivery) int) <-chan bool {
	placed := make(chan bool, 1)
	go func() { placed <- h.give(d, stopping, behind) }()
	return placed
}

// gaveWithin is the result of a give started by giveInBackground, which
// must return within 5 s: else the test fails with why.
func gaveWithin(t *testing.T, gave <-chan bool, why string) bool {
	t.Helper()
	select {
	case placed := <-gave:
		return placed
	case <-time.After(5 * time.Second):
		t.Fatal(why)
		return false
	}
}

// takeDirect waits for a give waiting for a worker and takes its delivery,
// as a worker's take does.
func takeDirect(t *testing.T, h *handoff, what string) *delivery {
	t.Helper()
	var got *delivery
	runtimetest.Eventually(t, 5*time.Second, what, func() bool {
		select {
		case got = <-h.direct:
			return true
		default:
			return false
		}
	})
	return got
}

// queued is a give's count of the messages behind, fixed at n.
func queued(n int) func(*delivery) int { return func(*delivery) int { return n } }

// TestHandoffPriority: buffered deliveries that carry the priority header
// are taken before the others, each kind in the order it came, and after
// close what is urgent is still taken before take reports the end.
func TestHandoffPriority(t *testing.T) {
	h := newHandoff(8, 1).prioritize("Urgent")
	msg := func(urgent bool) *delivery {
		m := nats.NewMsg("test.in")
		if urgent {
			m.Header.Set("Urgent", "1")
		}
		return &delivery{msg: m}
	}
	n1, u1, n2, u2, n3 := msg(false), msg(true), msg(false), msg(true), msg(false)
	for _, d := range []*delivery{n1, u1, n2, u2, n3} {
		if !h.give(d, nil, queued(0)) {
			t.Fatal("give refused a delivery")
		}
	}
	if n := h.buffered(); n != 5 {
		t.Fatalf("buffered = %d, want 5", n)
	}
	for i, want := range []*delivery{u1, u2, n1} {
		if d, ok := h.take(); !ok || d != want {
			t.Fatalf("take %d: got another delivery (ok %v), want urgent first, then in order", i+1, ok)
		}
	}
	u3 := msg(true)
	h.give(u3, nil, queued(0))
	h.close()
	for i, want := range []*delivery{u3, n2, n3} {
		if d, ok := h.take(); !ok || d != want {
			t.Fatalf("take %d after close: got another delivery (ok %v)", i+4, ok)
		}
	}
	if _, ok := h.take(); ok {
		t.Fatal("take after close and empty returned a delivery")
	}
}
