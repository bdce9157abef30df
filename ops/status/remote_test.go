package status_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/ops/status"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestCollectRemote: a remote function's instance carries the micro
// service instances that serve its endpoint, with their request counts,
// and the table lists them under the functions.
func TestCollectRemote(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	remote := strings.Replace(runtest.Manifest, "    concurrency: 2\n", "    concurrency: 2\n    remote: {subject: greeter.handle}\n", 1)
	rt := runtest.Start(t, nc, remote)
	for range 2 {
		runtimetest.StartRemote(t, ns.ClientURL(), "greeter-svc", "greeter.handle", func(req micro.Request, _ int) { _ = req.Respond(nil) })
	}
	runtest.Publish(t, nc, "test.in", `{"name":"a"}`, "")
	runtimetest.Eventually(t, 10*time.Second, "handled", func() bool { return runtest.Settled(rt, "greeter", 1) })
	var instances []status.Instance
	runtimetest.Eventually(t, 20*time.Second, "the function and both remote instances to answer", func() bool {
		var err error
		instances, err = status.Collect(context.Background(), nc, status.DefaultWindow)
		return err == nil && len(instances) == 1 && len(instances[0].RemoteInstances) == 2
	})
	requests := 0
	for _, r := range instances[0].RemoteInstances {
		if r.Service != "greeter-svc" || r.Version != "1.0.0" || r.ID == "" {
			t.Errorf("remote instance %+v lacks its identity", r)
		}
		requests += r.Requests
	}
	if requests != 1 || instances[0].Stats.Remote != "greeter.handle" {
		t.Errorf("remote instances %+v, stats remote %q; want 1 request in all, remote greeter.handle",
			instances[0].RemoteInstances, instances[0].Stats.Remote)
	}
	var buf bytes.Buffer
	if err := status.WriteTable(&buf, instances, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REMOTE FUNCTION", "greeter.handle", "greeter-svc", instances[0].RemoteInstances[1].ID} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}
