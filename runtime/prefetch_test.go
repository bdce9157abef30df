package runtime

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestBufferedMessagesKeptAlive holds a backlog in a deep buffer in front of
// one slow worker: the last buffered message waits about two and a half ack
// waits.
// A second instance (a plain puller on the same durable) is there to take
// any message whose ack wait runs out, as it would in production. The
// buffer keeper's heartbeats must keep every buffered message from being
// redelivered; the control without them shows the redeliveries they prevent.
func TestBufferedMessagesKeptAlive(t *testing.T) {
	tests := []struct {
		name          string
		keeper        bool
		wantRedeliver bool
	}{
		{name: "buffer heartbeats on", keeper: true},
		{name: "control without buffer heartbeats", keeper: false, wantRedeliver: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			const backlog = 150
			if err := ensureStream(context.Background(), env.js, manifest.StreamSpec{Name: "TEST", Subjects: []string{"test.>"}, Storage: "file", Replicas: 1}); err != nil {
				t.Fatal(err)
			}
			for i := range backlog {
				env.publish("test.in", fmt.Sprint(i))
			}
			m := testManifest(t, "    ackWait: 2s\n    concurrency: 1\n    prefetch: 120\n    maxDeliver: 20\n")
			fns := []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return slowHandler(40 * time.Millisecond), nil }}}
			rt, err := New(env.nc, m, fns, WithLogger(testLogger()))
			if err != nil {
				t.Fatal(err)
			}
			rt.opts.noBufferBeats = !tt.keeper
			r := env.run(rt)
			other := env.otherInstance()
			runtimetest.Eventually(t, 60*time.Second, "backlog handled", func() bool {
				return env.settled("TEST", "fn", backlog)
			})
			taken, otherRedelivered := other()
			s := r.rt.statsOf(t, "fn")
			redelivered := otherRedelivered + int(s.Redeliveries)
			t.Logf("jetfn handled %d, the other instance %d; redeliveries %d; buffer heartbeats %d",
				s.Handled, taken, redelivered, s.BufferBeats)
			if got := redelivered > 0; got != tt.wantRedeliver {
				t.Fatalf("redeliveries = %d, want some: %v", redelivered, tt.wantRedeliver)
			}
			if !tt.wantRedeliver && int(s.Handled)+taken != backlog {
				t.Fatalf("handled %d + %d, want each of %d messages once", s.Handled, taken, backlog)
			}
			if tt.keeper && s.BufferBeats == 0 {
				t.Fatal("no buffer heartbeats were sent")
			}
		})
	}
}

// TestNoPullStalls runs 30 short runs at concurrency 1 and fails on any gap
// over a second between handled messages, the stall nats.go's Consume
// shows with a buffer of one or two.
func TestNoPullStalls(t *testing.T) {
	for _, prefetch := range []string{"0", "derived"} {
		env := newEnv(t)
		spec := "    concurrency: 1\n"
		if prefetch != "derived" {
			spec += "    prefetch: " + prefetch + "\n"
		}
		rec := &recorder{}
		r := env.start(testManifest(t, spec), rec)
		var worst time.Duration
		for run := range 30 {
			begin, before := time.Now(), rec.count()
			for i := range 20 {
				env.publish("test.in", fmt.Sprint(run, ":", i))
			}
			runtimetest.Eventually(t, 30*time.Second, "run handled", func() bool { return rec.count() == before+20 })
			last := begin
			for _, d := range rec.all()[before:] {
				worst = max(worst, d.at.Sub(last))
				last = d.at
			}
		}
		t.Logf("prefetch %s: longest gap between handled messages over 30 runs: %s", prefetch, worst)
		if worst > time.Second {
			t.Errorf("prefetch %s: a gap of %s between handled messages", prefetch, worst)
		}
		_ = r.stop(t)
	}
}

// TestDrainReturnsBufferedAtOnce: on shutdown, buffered messages that never
// started go back with a Nak at once, so a second instance takes them long
// before the 30s ack wait would have released them.
func TestDrainReturnsBufferedAtOnce(t *testing.T) {
	env := newEnv(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	blocking := jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error {
		started <- struct{}{}
		<-release
		return nil
	})
	first := env.start(testManifest(t, "    ackWait: 30s\n    concurrency: 1\n    prefetch: 5\n"), blocking)
	for i := range 6 {
		env.publish("test.in", fmt.Sprint(i))
	}
	<-started
	runtimetest.Eventually(t, 10*time.Second, "five buffered", func() bool {
		return first.rt.bindingOf(t, "fn").unsettled.count(stateBuffered) == 5
	})
	first.cancel()
	runtimetest.Eventually(t, 10*time.Second, "buffered returned", func() bool {
		return first.rt.statsOf(t, "fn").Retried == 5
	})
	close(release)
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	env.start(testManifest(t, "    ackWait: 30s\n"), rec)
	runtimetest.Eventually(t, 10*time.Second, "buffered messages at the second instance", func() bool {
		return rec.count() == 5
	})
	for _, d := range rec.all() {
		if d.msg.NumDelivered != 2 {
			t.Fatalf("message %s delivered %d times, want 2 (returned by the drain)", d.msg.Data, d.msg.NumDelivered)
		}
	}
}

// otherInstance pulls and acks on the test consumer until the test ends, as
// a second instance would; it returns a func reporting how many messages it
// took and how many of those were redeliveries.
func (e *testEnv) otherInstance() func() (taken, redelivered int) {
	e.t.Helper()
	c, err := e.js.Consumer(context.Background(), "TEST", "fn")
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var taken, redelivered atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			batch, err := c.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				return
			}
			for m := range batch.Messages() {
				_ = m.Ack()
				taken.Add(1)
				if meta, err := m.Metadata(); err == nil && meta.NumDelivered > 1 {
					redelivered.Add(1)
				}
			}
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done })
	return func() (int, int) { return int(taken.Load()), int(redelivered.Load()) }
}

// TestMessagesBehindAWaitingHandoffKeptAlive: a message that arrives alone
// while every worker is busy waits in the puller for a worker
// (the handoff, delivery.go), and the messages that arrive after it wait in nats.go's
// queue, where the keeper cannot see them. A tick of the keeper or of the
// pull watch must end that wait, so they reach the buffer and are kept
// alive: here both workers are busy for three ack waits, and a second
// instance takes any message whose ack wait runs out. (Without either
// release two are redelivered to it; either one alone is enough.)
func TestMessagesBehindAWaitingHandoffKeptAlive(t *testing.T) {
	env := newEnv(t)
	const backlog = 5
	started := make(chan struct{}, 2)
	var calls atomic.Int32
	busyFirstTwo := jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
		if calls.Add(1) <= 2 {
			started <- struct{}{}
			return slowHandler(3*time.Second)(ctx, msg)
		}
		return nil
	})
	r := env.start(testManifest(t, "    ackWait: 1s\n    concurrency: 2\n    prefetch: 3\n    maxDeliver: 20\n"), busyFirstTwo)
	for i := range 2 {
		env.publish("test.in", fmt.Sprint(i))
		<-started
	}
	env.publish("test.in", "2") // alone: the puller waits to hand it over
	b := r.rt.bindingOf(t, "fn")
	runtimetest.Eventually(t, 10*time.Second, "the third message held", func() bool {
		return b.unsettled.count(stateBuffered) == 1
	})
	env.publish("test.in", "3")
	env.publish("test.in", "4")
	runtimetest.Eventually(t, 10*time.Second, "all five delivered", func() bool {
		ci := env.consumerInfo("TEST", "fn")
		return ci.NumPending == 0 && ci.NumAckPending == backlog
	})
	other := env.otherInstance() // from now on it takes whatever is redelivered
	runtimetest.Eventually(t, 30*time.Second, "backlog handled", func() bool {
		return env.settled("TEST", "fn", backlog)
	})
	taken, otherRedelivered := other()
	s := r.rt.statsOf(t, "fn")
	t.Logf("jetfn handled %d, the other instance %d; buffer heartbeats %d", s.Handled, taken, s.BufferBeats)
	if taken != 0 || otherRedelivered != 0 || s.Redeliveries != 0 || s.Handled != backlog {
		t.Fatalf("handled %d here and %d (%d redelivered) by the other instance, %d redeliveries here; want all %d here, once",
			s.Handled, taken, otherRedelivered, s.Redeliveries, backlog)
	}
}
