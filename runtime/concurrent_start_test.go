package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// concurrentStarts is how many instances TestConcurrentStartsOnANewServer
// starts at once: before the fix, ten made the race show in 3 runs of 40
// (`go test -count=40 -run TestConcurrentStartsOnANewServer ./runtime`),
// six in 1 of 40.
const concurrentStarts = 10

// TestConcurrentStartsOnANewServer starts several instances of one
// manifest at the same moment on a server that has none of its streams,
// consumers or position bucket yet, as a fleet's first deploy does
// (test/scale's TestScaleOut). Each finds no consumer and decides where to
// create it. The first to create it records its ack floor at once, and an
// instance that reads that record after its own lookup decides to start
// just after it: a start the server refuses to give the existing consumer
// ("deliver policy can not be updated"), which made that instance exit.
// Every instance must start, on the one consumer.
func TestConcurrentStartsOnANewServer(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	m := testManifest(t, "    outputs:\n      - subject: test.out\n        stream: TEST\n")
	fns := []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { return nil }), nil
	}}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gate := make(chan struct{})
	var runs []*running
	for range concurrentStarts {
		rt, err := New(runtimetest.Connect(t, ns.ClientURL()), m, fns, WithLogger(testLogger()), WithDrainTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		r := &running{rt: rt, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(r.done)
			<-gate
			r.err = rt.Run(ctx)
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		runs = append(runs, r)
	}
	close(gate)
	deadline := time.After(30 * time.Second)
	for i, r := range runs {
		select {
		case <-r.rt.Ready():
		case <-r.done:
			t.Errorf("instance %d of %d ended before it was ready: %v", i+1, len(runs), r.err)
		case <-deadline:
			t.Fatalf("instance %d of %d not ready after 30s", i+1, len(runs))
		}
	}
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), "TEST")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Consumers; n != 1 {
		t.Errorf("stream TEST has %d consumers, want the function's one", n)
	}
}
