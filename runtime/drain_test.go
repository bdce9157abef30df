package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestDrainLetsInFlightFinish cancels Run while a handler runs: Run must
// wait for it, ack its message and only then return.
func TestDrainLetsInFlightFinish(t *testing.T) {
	env := newEnv(t)
	started, release := make(chan struct{}), make(chan struct{})
	h := jetfn.HandlerFunc(func(ctx context.Context, _ jetfn.Msg) error {
		close(started)
		<-release
		return ctx.Err() // nil: shutdown does not cancel a running handler
	})
	r := env.start(testManifest(t, "    ackWait: 1s\n"), h)
	env.publish("test.in", `{}`)
	<-started
	r.cancel()
	select {
	case <-r.done:
		t.Fatal("Run returned while a handler was still running")
	default:
	}
	begin := time.Now()
	close(release)
	<-r.done
	t.Logf("drain after the handler finished: %s", time.Since(begin))
	if r.err != nil {
		t.Fatalf("Run returned %v", r.err)
	}
	info := env.consumerInfo("TEST", "fn")
	if info.AckFloor.Stream != 1 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Fatalf("ack floor %d, ack pending %d, redelivered %d; want 1, 0, 0",
			info.AckFloor.Stream, info.NumAckPending, info.NumRedelivered)
	}
}

// TestDrainTimeoutReturnsMessage: a handler that outlives the drain timeout
// has its message Nak'd without delay, so a second instance gets it long
// before the 30s ack wait would have released it.
func TestDrainTimeoutReturnsMessage(t *testing.T) {
	env := newEnv(t)
	m := testManifest(t, "    ackWait: 30s\n")
	hang := jetfn.HandlerFunc(func(ctx context.Context, m jetfn.Msg) error {
		<-ctx.Done()
		return ctx.Err()
	})
	first := env.start(m, hang, WithDrainTimeout(200*time.Millisecond))
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 10*time.Second, "first delivery", func() bool {
		return first.rt.statsOf(t, "fn").InFlight == 1
	})
	begin := time.Now()
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("drain with a hung handler took %s (timeout 200ms)", time.Since(begin))
	rec := &recorder{}
	env.start(testManifest(t, "    ackWait: 30s\n"), rec)
	runtimetest.Eventually(t, 10*time.Second, "redelivery to the second instance", func() bool {
		return rec.count() == 1
	})
	if got := rec.all()[0].msg.NumDelivered; got != 2 {
		t.Fatalf("second instance saw delivery %d, want 2", got)
	}
}
