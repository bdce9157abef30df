package pause_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/ops/pause"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// server is an embedded server and an admin's JetStream handle on it.
type server struct {
	url string
	js  jetstream.JetStream
}

func startServer(t *testing.T) server {
	ns := runtimetest.StartNATS(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	return server{url: ns.ClientURL(), js: js}
}

// start runs the greeter on manifestYAML in an instance of its own.
func (s server) start(t *testing.T, manifestYAML string) *runtime.Runtime {
	return runtest.Start(t, runtimetest.Connect(t, s.url), manifestYAML)
}

// drained waits until consumer has handled every stored message, and
// returns its info: Delivered.Last is when the server last delivered one.
func (s server) drained(t *testing.T, stream, consumer string, stored uint64) *jetstream.ConsumerInfo {
	t.Helper()
	var info *jetstream.ConsumerInfo
	runtimetest.Eventually(t, 30*time.Second, "every message acknowledged", func() bool {
		c, err := s.js.Consumer(context.Background(), stream, consumer)
		if err != nil {
			return false
		}
		info = c.CachedInfo()
		return info.AckFloor.Stream >= stored && info.NumAckPending == 0
	})
	return info
}

func (s server) publish(t *testing.T, subject string, n int) uint64 {
	t.Helper()
	var seq uint64
	for range n {
		ack, err := s.js.Publish(context.Background(), subject, []byte(`{"name":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		seq = ack.Sequence
	}
	return seq
}

// TestPauseHoldsEveryInstanceUntilItsTime: paused until a time, neither
// of two instances is handed a message before it, though both are ready
// and pull; both report the pause, and /readyz's checks pass; after the
// time the server resumes the function by itself.
func TestPauseHoldsEveryInstanceUntilItsTime(t *testing.T) {
	s := startServer(t)
	instances := []*runtime.Runtime{s.start(t, runtest.Manifest), s.start(t, runtest.Manifest)}
	until := time.Now().Add(2 * time.Second)
	consumers, err := pause.Pause(context.Background(), s.js, "greeter", until)
	if err != nil || len(consumers) != 1 || consumers[0].String() != "TEST/greeter" {
		t.Fatalf("Pause = %v, %v; want the greeter's durable", consumers, err)
	}
	last := s.publish(t, "test.in", 3)
	for _, rt := range instances {
		runtimetest.Eventually(t, 10*time.Second, "the pause in the instance's stats", func() bool {
			return rt.Stats()[0].PausedUntil != nil
		})
		if err := rt.ConsumerProblems(); err != nil {
			t.Errorf("a paused function fails readiness: %v", err)
		}
	}
	info := s.drained(t, "TEST", "greeter", last)
	if info.Delivered.Last == nil || info.Delivered.Last.Before(until) {
		t.Fatalf("last delivery at %v, before the pause ended at %v", info.Delivered.Last, until)
	}
	for _, rt := range instances {
		runtimetest.Eventually(t, 10*time.Second, "the pause gone from the stats", func() bool {
			return rt.Stats()[0].PausedUntil == nil
		})
	}
}

// TestPauseSurvivesRestartAndDeploy: a pause is the server's, so an
// instance started after the paused one stopped, with a manifest that
// changes the consumer, and a live deploy that changes it again, keep it.
func TestPauseSurvivesRestartAndDeploy(t *testing.T) {
	s := startServer(t)
	first := runtest.New(t, runtimetest.Connect(t, s.url), runtest.Manifest)
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- first.Run(ctx) }()
	<-first.Ready()
	until := time.Now().Add(10 * time.Minute) // resumed below, never reached: no race with a slow restart
	if _, err := pause.Pause(context.Background(), s.js, "greeter", until); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	restarted := s.start(t, strings.Replace(runtest.Manifest, "ackWait: 5s", "ackWait: 6s", 1))
	changed, err := manifest.Parse([]byte(strings.Replace(runtest.Manifest, "ackWait: 5s", "ackWait: 7s", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.Apply(context.Background(), changed); err != nil {
		t.Fatal(err)
	}
	c, err := s.js.Consumer(context.Background(), "TEST", "greeter")
	if err != nil || c.CachedInfo().Config.AckWait != 7*time.Second || !c.CachedInfo().Paused {
		t.Fatalf("consumer after the deploy: %+v, %v; want ackWait 7s and still paused", c.CachedInfo(), err)
	}
	last := s.publish(t, "test.in", 2)
	resumed := time.Now()
	if _, err := pause.Resume(context.Background(), s.js, "greeter"); err != nil {
		t.Fatal(err)
	}
	info := s.drained(t, "TEST", "greeter", last)
	if info.Delivered.Last.Before(resumed) {
		t.Fatalf("last delivery at %v, before the resume at %v: the restart or the deploy lifted the pause", info.Delivered.Last, resumed)
	}
}

// keyedManifest is the greeter keyed by test.<key>, in two partitions.
var keyedManifest = strings.NewReplacer("subject: test.in", "subject: test.*\n    key: {token: 2}\n    ordered: true\n    partitions: 2").
	Replace(runtest.Manifest)

// TestResumeKeyedFunction: a keyed function's pause holds every partition
// until `resume`, and the message waiting is delivered once, after it.
// The router, and a backfill of the router's, copy on.
func TestResumeKeyedFunction(t *testing.T) {
	s := startServer(t)
	rt := s.start(t, keyedManifest)
	input, err := s.js.Stream(context.Background(), "TEST")
	if err != nil {
		t.Fatal(err)
	}
	// What a widened filter leaves while the router catches up.
	if _, err := input.CreateConsumer(context.Background(), jetstream.ConsumerConfig{Durable: "greeter-router-backfill-a",
		AckPolicy: jetstream.AckExplicitPolicy, Metadata: map[string]string{wire.FunctionMetadataKey: "greeter", wire.RoleMetadataKey: wire.RoleRouter}}); err != nil {
		t.Fatal(err)
	}
	consumers, err := pause.Pause(context.Background(), s.js, "greeter", pause.Indefinitely(time.Now()))
	if err != nil || len(consumers) != 2 {
		t.Fatalf("Pause = %v, %v; want the two partition consumers", consumers, err)
	}
	last := s.publish(t, "test.a", 1)
	runtimetest.Eventually(t, 10*time.Second, "the copy in the keyed stream and the pause in the stats", func() bool {
		st := rt.Stats()[0]
		return st.PausedUntil != nil && st.NumPending == 1
	})
	resumed := time.Now()
	if consumers, err = pause.Resume(context.Background(), s.js, "greeter"); err != nil || len(consumers) != 2 {
		t.Fatalf("Resume = %v, %v", consumers, err)
	}
	runtimetest.Eventually(t, 30*time.Second, "the message handled", func() bool { return runtest.Settled(rt, "greeter", last) })
	var info *jetstream.ConsumerInfo
	for _, c := range consumers {
		if i := s.drained(t, c.Stream, c.Name, 0); i.Delivered.Consumer > 0 {
			info = i
		}
	}
	if info == nil {
		t.Fatal("no partition delivered the message")
	}
	if info.Delivered.Consumer != 1 || info.Delivered.Last.Before(resumed) {
		t.Fatalf("partition delivered %d messages, last at %v; want 1, after the resume at %v", info.Delivered.Consumer, info.Delivered.Last, resumed)
	}
	if _, err := pause.Pause(context.Background(), s.js, "nobody", time.Now().Add(time.Minute)); err == nil {
		t.Error("pausing an unknown function succeeded")
	}
}
