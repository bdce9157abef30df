package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jetfn/jetfn/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

type fakeRuntime struct {
	ready                              chan struct{}
	consumerErr, workersErr, remoteErr error
}

func (f fakeRuntime) Stats() []wire.Stats      { return nil }
func (f fakeRuntime) Ready() <-chan struct{}   { return f.ready }
func (f fakeRuntime) ConsumerProblems() error  { return f.consumerErr }
func (f fakeRuntime) WorkersStuck() error      { return f.workersErr }
func (f fakeRuntime) RemotesUnanswered() error { return f.remoteErr }

type fakeConn bool

func (c fakeConn) IsConnected() bool { return bool(c) }

type fakeMongo struct{ err error }

func (m fakeMongo) Ping(context.Context, *readpref.ReadPref) error { return m.err }

// TestReadyz is the check logic alone; TestServe runs it against real
// servers.
func TestReadyz(t *testing.T) {
	bound := make(chan struct{})
	close(bound)
	tests := []struct {
		name     string
		ready    chan struct{}
		rt       fakeRuntime
		probes   Probes
		wantCode int
		wantBody []string
	}{
		{name: "all well", ready: bound, probes: Probes{NATS: fakeConn(true), Mongo: fakeMongo{}},
			wantCode: 200, wantBody: []string{"ok   functions", "ok   nats", "ok   mongo"}},
		{name: "without a database", ready: bound, probes: Probes{NATS: fakeConn(true)}, wantCode: 200},
		{name: "not bound", ready: make(chan struct{}), probes: Probes{NATS: fakeConn(true)},
			wantCode: 503, wantBody: []string{"fail functions"}},
		{name: "disconnected", ready: bound, probes: Probes{NATS: fakeConn(false)},
			wantCode: 503, wantBody: []string{"fail nats: not connected"}},
		{name: "mongo down", ready: bound, probes: Probes{NATS: fakeConn(true), Mongo: fakeMongo{errors.New("no server")}},
			wantCode: 503, wantBody: []string{"fail mongo: no server"}},
		{name: "consumer missing", ready: bound, rt: fakeRuntime{consumerErr: errors.New("function fn: missing consumer fn")},
			probes: Probes{NATS: fakeConn(true)}, wantCode: 503, wantBody: []string{"fail consumers: function fn: missing", "ok   workers"}},
		{name: "every worker stuck", ready: bound, rt: fakeRuntime{workersErr: errors.New("function fn: 1 abandoned")},
			probes: Probes{NATS: fakeConn(true)}, wantCode: 503, wantBody: []string{"fail workers: function fn", "ok   consumers"}},
		{name: "remote without responders", ready: bound, rt: fakeRuntime{remoteErr: errors.New("function fn: no responders on remote r")},
			probes: Probes{NATS: fakeConn(true)}, wantCode: 503, wantBody: []string{"fail remotes: function fn: no responders", "ok   workers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.probes.PingTimeout = DefaultPingTimeout
			rec := httptest.NewRecorder()
			rt := tt.rt
			rt.ready = tt.ready
			readyHandler(rt, tt.probes)(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != tt.wantCode {
				t.Errorf("code %d, want %d; body:\n%s", rec.Code, tt.wantCode, rec.Body)
			}
			for _, want := range tt.wantBody {
				if !strings.Contains(rec.Body.String(), want) {
					t.Errorf("body lacks %q:\n%s", want, rec.Body)
				}
			}
		})
	}
}

type fixedStats []wire.Stats

func (f fixedStats) Stats() []wire.Stats { return f }

// TestRemoteGauges: a remote function has its instance count and whether
// it is unanswered; a compiled-in one has neither.
func TestRemoteGauges(t *testing.T) {
	src := fixedStats{{Function: "local"}, {Function: "greet", Remote: "greeter.handle", RemoteInstances: 2},
		{Function: "lonely", Remote: "lonely.handle", RemoteError: "no responders on remote lonely.handle"}}
	want := `
# HELP jetfn_remote_instances Micro service instances the last discovery found serving a remote function's endpoint.
# TYPE jetfn_remote_instances gauge
jetfn_remote_instances{function="greet"} 2
jetfn_remote_instances{function="lonely"} 0
# HELP jetfn_remote_unanswered 1 while a remote function's endpoint has no responders (/readyz fails).
# TYPE jetfn_remote_unanswered gauge
jetfn_remote_unanswered{function="greet"} 0
jetfn_remote_unanswered{function="lonely"} 1
`
	if err := testutil.CollectAndCompare(statsCollector{src: src}, strings.NewReader(want),
		"jetfn_remote_instances", "jetfn_remote_unanswered"); err != nil {
		t.Error(err)
	}
}

// TestConsumerLag: the lag is what the consumer has not delivered plus
// what it delivered and is not acknowledged.
func TestConsumerLag(t *testing.T) {
	src := fixedStats{{Function: "fn", NumPending: 40, NumAckPending: 2}}
	want := `
# HELP jetfn_consumer_lag Messages the function has not finished: pending plus acknowledgement pending, as the consumer's leader reports them (a KEDA scaling metric).
# TYPE jetfn_consumer_lag gauge
jetfn_consumer_lag{function="fn"} 42
`
	if err := testutil.CollectAndCompare(statsCollector{src: src}, strings.NewReader(want), "jetfn_consumer_lag"); err != nil {
		t.Error(err)
	}
}
