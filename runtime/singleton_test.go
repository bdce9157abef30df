package runtime

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// countingHandler counts the messages one instance handled.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Handle(context.Context, jetfn.Msg) error {
	h.n.Add(1)
	return nil
}

// TestSingletonOneInstanceAtATime: of two instances of a singleton
// function, one handles every message and the other stands by, as their
// stats say; when the active one shuts down the other takes over.
func TestSingletonOneInstanceAtATime(t *testing.T) {
	env := newEnv(t)
	m := testManifest(t, "    concurrency: 4\n    singleton: true\n")
	a, b := &countingHandler{}, &countingHandler{}
	ra, rb := env.start(m, a), env.start(m, b)
	roles := func() (string, string) { return ra.rt.Stats()[0].Singleton, rb.rt.Stats()[0].Singleton }
	runtimetest.Eventually(t, 10*time.Second, "one active, one standing by", func() bool {
		x, y := roles()
		return x == "active" && y == "standby" || x == "standby" && y == "active"
	})
	active, standby, activeRun, standbyRun := a, b, ra, rb
	if x, _ := roles(); x != "active" {
		active, standby, activeRun, standbyRun = b, a, rb, ra
	}
	for range 20 {
		env.publish("test.in", "x")
	}
	runtimetest.Eventually(t, 10*time.Second, "20 handled", func() bool { return a.n.Load()+b.n.Load() == 20 })
	if active.n.Load() != 20 {
		t.Fatalf("active handled %d, standby %d; want all 20 by the active one", active.n.Load(), standby.n.Load())
	}
	if err := activeRun.stop(t); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 10*time.Second, "the standby active", func() bool {
		return standbyRun.rt.Stats()[0].Singleton == "active"
	})
	for range 5 {
		env.publish("test.in", "y")
	}
	runtimetest.Eventually(t, 10*time.Second, "the other instance handled the next 5", func() bool { return standby.n.Load() == 5 })
}

// TestLeaseOfADeadHolderRunsOut: a holder that stops renewing without
// releasing (a process killed) keeps the lease until it runs out; then
// another instance takes it.
func TestLeaseOfADeadHolderRunsOut(t *testing.T) {
	env := newEnv(t)
	kv, err := env.js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: manifest.LeasesBucket})
	if err != nil {
		t.Fatal(err)
	}
	shared := &sharedKV{kv: kv}
	dead := newLease(shared, "fn", "dead", testLogger())
	dead.term = time.Second
	dead.step(context.Background()) // takes it, and never renews or releases
	if !dead.holds() {
		t.Fatal("the first instance did not take a free lease")
	}
	next := newLease(shared, "fn", "next", testLogger())
	next.term = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	go next.keep(ctx)
	runtimetest.Eventually(t, 10*time.Second, "the lease taken over", next.holds)
	if waited := time.Since(start); waited < 700*time.Millisecond {
		t.Fatalf("taken over after %s, before the dead holder's lease ran out (1s)", waited)
	}
}

// TestSingletonKeptAcrossALiveDeploy: re-binding a singleton function in
// its active instance (a deploy that changes it) keeps the lease there,
// while the old binding drains a slow handler: the other instance stays
// standing by throughout, and the active one stays active.
func TestSingletonKeptAcrossALiveDeploy(t *testing.T) {
	env := newEnv(t)
	release := make(chan struct{})
	slow := jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
		if string(msg.Data) == "slow" {
			<-release
		}
		return nil
	})
	m := testManifest(t, "    singleton: true\n")
	ra := env.start(m, slow)
	runtimetest.Eventually(t, 10*time.Second, "the first instance active", func() bool { return ra.rt.Stats()[0].Singleton == "active" })
	rb := env.start(m, slow)
	env.publish("test.in", "slow")
	runtimetest.Eventually(t, 10*time.Second, "the slow message running", func() bool { return ra.rt.statsOf(t, "fn").InFlight == 1 })
	applied := make(chan error, 1)
	go func() {
		applied <- ra.rt.Apply(context.Background(), testManifest(t, "    singleton: true\n    concurrency: 2\n"))
	}()
	// The old binding drains the slow run for three renewals of the lease.
	deadline := time.Now().Add(3 * leaseTerm / 5)
	for time.Now().Before(deadline) {
		if s := rb.rt.Stats()[0].Singleton; s != "standby" {
			t.Fatalf("the other instance is %s during the deploy, want standby", s)
		}
		time.Sleep(50 * time.Millisecond) // sampling a state that must hold throughout
	}
	close(release)
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * leaseTerm / 5)
	for time.Now().Before(deadline) {
		if a, b := ra.rt.Stats()[0].Singleton, rb.rt.Stats()[0].Singleton; a != "active" || b != "standby" {
			t.Fatalf("after the deploy: %s and %s, want active and standby", a, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
