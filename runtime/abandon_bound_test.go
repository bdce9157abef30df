package runtime

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestAbandonedHandlersBounded is issue 29, item 14: a handler that
// ignores its context is abandoned at the timeout and its worker
// replaced; one that hangs on every message made a new goroutine per
// message, without bound, while jetfn kept pulling. Abandoned handlers now
// hold at most as many goroutines as the function has workers: past that a
// worker's place stays empty, and the pull with it, until one returns.
// Before the fix the six hanging messages below all got a handler.
func TestAbandonedHandlersBounded(t *testing.T) {
	env := newEnv(t)
	release := make(chan struct{})
	var started atomic.Int32
	h := jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error {
		started.Add(1)
		<-release // ignores its context
		return nil
	})
	r := env.start(testManifest(t, "    concurrency: 2\n    prefetch: 0\n    timeout: 200ms\n    ackWait: 10s\n    maxDeliver: 100\n    backoff: [50ms]\n"), h)
	for i := range 6 {
		env.publish("test.in", fmt.Sprint(i))
	}
	runtimetest.Eventually(t, 10*time.Second, "four runs abandoned", func() bool { return r.rt.statsOf(t, "fn").Abandoned >= 4 })
	s := r.rt.statsOf(t, "fn")
	if n := started.Load(); n != 4 || s.AbandonedRunning != 4 {
		t.Fatalf("%d handler runs started, %d abandoned still running; want 4 and 4: two workers, two replacements, then none", n, s.AbandonedRunning)
	}
	close(release) // the hung handlers return; their workers come back
	runtimetest.Eventually(t, 20*time.Second, "every message acked", func() bool { return env.settled("TEST", "fn", 6) })
	// The hung handlers return on their own time after the release.
	runtimetest.Eventually(t, 10*time.Second, "abandoned_running back to 0 once the handlers returned", func() bool {
		return r.rt.statsOf(t, "fn").AbandonedRunning == 0
	})
}
