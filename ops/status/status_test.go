package status_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/ops/status"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestCollect runs two instances of one function and a micro service that
// is not jetfn's, and checks that Collect finds exactly the two instances
// with each one's own counters.
func TestCollect(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	ncA := runtimetest.Connect(t, ns.ClientURL())
	first := runtest.Start(t, ncA, runtest.Manifest)
	for _, data := range []string{`{"name":"a"}`, `{"name":"b"}`, `{"name":"poison"}`} {
		runtest.Publish(t, ncA, "test.in", data, "")
	}
	runtimetest.Eventually(t, 10*time.Second, "three settled", func() bool { return runtest.Settled(first, "greeter", 3) })
	runtest.Start(t, runtimetest.Connect(t, ns.ClientURL()), runtest.Manifest)
	other, err := micro.AddService(ncA, micro.Config{Name: "not-jetfn", Version: "0.1.0",
		Endpoint: &micro.EndpointConfig{Subject: "other.echo", Handler: micro.HandlerFunc(func(r micro.Request) { _ = r.Respond(nil) })}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop() })

	ctx := context.Background()
	nc := runtimetest.Connect(t, ns.ClientURL())
	// A loaded machine can answer after the window; the test is about what
	// the instances say, so it asks again until both answered in time.
	var instances []status.Instance
	runtimetest.Eventually(t, 20*time.Second, "both greeters to answer within the window", func() bool {
		instances, err = status.Collect(ctx, nc, status.DefaultWindow)
		return err == nil && len(instances) == 2
	})
	var busy, idle status.Instance
	for _, in := range instances {
		if in.Function != "greeter" || in.Version != "1.2.3" || in.ID == "" || in.Started.IsZero() || in.ManifestDigest == "" {
			t.Errorf("instance %+v lacks its identity", in)
		}
		if in.Stats.Handled > 0 {
			busy = in
		} else {
			idle = in
		}
	}
	if busy.ID == idle.ID {
		t.Fatalf("both instances have ID %q", busy.ID)
	}
	s := busy.Stats
	if s.Handled != 3 || s.Acked != 2 || s.DeadLettered != 1 || s.Retried != 0 || s.InFlight != 0 ||
		s.NumPending != 0 || s.NumAckPending != 0 || !strings.Contains(s.LastError, "poisoned greeting") {
		t.Errorf("first instance stats %+v, want 3 handled, 2 acked, 1 dead-lettered, nothing pending, the poison as last error", s)
	}
	if idle.Stats.Handled != 0 || idle.Stats.Function != "greeter" {
		t.Errorf("second instance stats %+v, want greeter with nothing handled", idle.Stats)
	}

	var buf bytes.Buffer
	if err := status.WriteJSON(&buf, instances); err != nil {
		t.Fatal(err)
	}
	var decoded []status.Instance
	if err := json.Unmarshal(buf.Bytes(), &decoded); err != nil || len(decoded) != 2 || decoded[0].Stats.Function != "greeter" {
		t.Errorf("--json output %s does not parse back to the 2 instances: %v", buf.String(), err)
	}
	buf.Reset()
	if err := status.WriteTable(&buf, instances, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FUNCTION", "LAST ERROR", busy.ID, idle.ID, "poisoned greeting"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestCollectNothing is an account with no services: an empty answer after
// the window, not an error.
func TestCollectNothing(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	instances, err := status.Collect(context.Background(), runtimetest.Connect(t, ns.ClientURL()), 50*time.Millisecond)
	if err != nil || len(instances) != 0 {
		t.Fatalf("Collect = %v, %v; want nothing", instances, err)
	}
	var buf bytes.Buffer
	_ = status.WriteTable(&buf, instances, time.Now())
	if !strings.Contains(buf.String(), "no jetfn function instances") {
		t.Errorf("table = %q", buf.String())
	}
}

func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := status.Watch(ctx, time.Millisecond, func(context.Context) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Watch = %v after %d calls, want nil after 3 (ended by the cancel)", err, calls)
	}
	boom := context.DeadlineExceeded
	if err := status.Watch(context.Background(), time.Millisecond, func(context.Context) error { return boom }); err != boom {
		t.Fatalf("Watch = %v, want the show error", err)
	}
}
