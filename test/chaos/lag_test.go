package chaos

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/test/testkit"
)

// lagManifest is one R3 function that holds its two running messages and
// leaves the rest pending.
const lagManifest = `
streams:
  - {name: LAG, subjects: ["lag.>"], replicas: 3}
  - {name: DEADLETTER, subjects: ["deadletter.>"], replicas: 3}
functions:
  - {name: held, version: 1.0.0, stream: LAG, subject: lag.in, concurrency: 2, prefetch: 0, ackWait: 30s, timeout: 10m}
`

// TestLagMetricThroughLeaderFailover: jetfn_consumer_lag (pending plus
// acknowledgement pending in the function's stats) equals the consumer's
// info, and when the consumer's leader is SIGKILLed it keeps its last
// value until the new leader answers, instead of falling to zero (which
// would scale a KEDA deployment down in the middle of a backlog); then it
// equals the new leader's info.
func TestLagMetricThroughLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three nats-server processes")
	}
	ctx := t.Context()
	dir := t.TempDir()
	bin, err := testkit.BuildPackage(ctx, "github.com/nats-io/nats-server/v2", filepath.Join(dir, "nats-server"))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := StartCluster(ctx, bin, dir, 3, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	if err := cluster.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(cluster.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	rt := startHolding(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const messages = 20
	for range messages {
		if _, err := js.Publish(ctx, "lag.in", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	leader := ""
	poll(t, "the lag in the stats and in the consumer's info", func() bool {
		info, err := js.Consumer(ctx, "LAG", "held")
		if err != nil {
			return false
		}
		ci := info.CachedInfo()
		leader = ci.Cluster.Leader
		return lag(rt) == messages && ci.NumPending+uint64(ci.NumAckPending) == messages
	})
	cluster.Node(leader).Kill()
	var zero, stale int
	poll(t, "a new consumer leader", func() bool {
		s := rt.Stats()[0]
		if s.NumPending+uint64(s.NumAckPending) == 0 {
			zero++
		}
		if s.PendingStale {
			stale++
		}
		c, err := js.Consumer(ctx, "LAG", "held")
		return err == nil && c.CachedInfo().Cluster.Leader != "" && c.CachedInfo().Cluster.Leader != leader
	})
	if zero > 0 {
		t.Errorf("the lag read 0 in %d looks during the failover; want its last value", zero)
	}
	if stale == 0 {
		t.Error("no look fell back on the last value: the failover went unseen, the test proved nothing")
	}
	poll(t, "the lag from the new leader", func() bool {
		c, err := js.Consumer(ctx, "LAG", "held")
		if err != nil {
			return false
		}
		ci := c.CachedInfo()
		return lag(rt) == ci.NumPending+uint64(ci.NumAckPending) && lag(rt) == messages
	})
}

// startHolding runs the held function, whose handlers return only when
// the test ends.
func startHolding(t *testing.T, nc *nats.Conn) *runtime.Runtime {
	t.Helper()
	m, err := manifest.Parse([]byte(lagManifest))
	if err != nil {
		t.Fatal(err)
	}
	hold := func(jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(ctx context.Context, _ jetfn.Msg) error {
			<-ctx.Done()
			return ctx.Err()
		}), nil
	}
	rt, err := runtime.New(nc, m, []jetfn.Function{{Name: "held", New: hold}}, runtime.WithDrainTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-rt.Ready():
	case err := <-done:
		t.Fatalf("runtime stopped before ready: %v", err)
	}
	return rt
}

// lag is jetfn_consumer_lag's value for the held function.
func lag(rt *runtime.Runtime) uint64 {
	s := rt.Stats()[0]
	return s.NumPending + uint64(s.NumAckPending)
}

// poll waits up to a minute for cond, looking every 100ms.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := testkit.Poll(ctx, 100*time.Millisecond, what, func(context.Context) bool { return cond() }); err != nil {
		t.Fatal(err)
	}
}
