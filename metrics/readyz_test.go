package metrics_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/metrics"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// withRemote adds a remote function, served by a micro endpoint on
// greet.handle, to the greeter's manifest.
const withRemote = runtest.Manifest + `
  - name: remote-greet
    version: 1.0.0
    stream: TEST
    subject: test.remote
    remote: {subject: greet.handle}
`

// TestReadyzWaitsForRemotes: /readyz answers 200 only once every remote
// function's endpoint is known to have a responder. Before the first
// discovery probe has answered nothing is known, so it fails then too;
// without a responder it goes on failing, and with one it passes once the
// probe found it.
func TestReadyzWaitsForRemotes(t *testing.T) {
	tests := []struct {
		name     string
		serving  bool
		wantCode int
		wantBody string
	}{
		{name: "nothing serves the endpoint", wantCode: http.StatusServiceUnavailable,
			wantBody: "fail remotes: function remote-greet: no responders on remote greet.handle"},
		{name: "a service serves the endpoint", serving: true, wantCode: http.StatusOK, wantBody: "ok   remotes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := runtimetest.StartNATS(t)
			nc := runtimetest.Connect(t, ns.ClientURL())
			if tt.serving {
				runtimetest.StartRemote(t, ns.ClientURL(), "greet-svc", "greet.handle", func(req micro.Request, _ int) { _ = req.Respond(nil) })
			}
			rt := runtest.New(t, nc, withRemote)
			srv, err := metrics.New().Serve("127.0.0.1:0", rt, metrics.Probes{NATS: nc})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Close() })
			readyz := "http://" + srv.Addr() + "/readyz"
			runtest.Run(t, rt)
			<-rt.Ready()
			// Until the first probe's verdict, nothing is known: never 200.
			var code int
			var body string
			runtimetest.Eventually(t, 10*time.Second, "the first probe's verdict on "+readyz, func() bool {
				verdict := probed(rt.Stats()) // before the GET, so the answer reflects it
				code, body = get(t, readyz)
				if code == http.StatusOK && !probed(rt.Stats()) {
					t.Fatalf("/readyz answered 200 before any discovery probe answered:\n%s", body)
				}
				return verdict
			})
			if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Fatalf("/readyz = %d\n%s\nwant %d naming %q", code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

// probed reports whether a discovery probe has given its verdict on the
// remote function: instances found, or none.
func probed(stats []wire.Stats) bool {
	for _, s := range stats {
		if s.Remote != "" {
			return s.RemoteInstances > 0 || strings.Contains(s.RemoteError, "no responders")
		}
	}
	return false
}
