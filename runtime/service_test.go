package runtime

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// TestMicroDiscovery asks the standard $SRV subjects, as `nats micro ls`,
// `info` and `stats` do, and checks that they carry the function's version,
// metadata and JetStream counters.
func TestMicroDiscovery(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{result: func(m jetfn.Msg) error {
		if string(m.Data) == "poison" {
			return jetfn.Permanent(errors.New("poison"))
		}
		return nil
	}}
	env.start(testManifest(t, "    version: 1.2.3\n    ackWait: 3s\n"), rec)
	env.publish("test.in", "ok")
	env.publish("test.in", "poison")
	runtimetest.Eventually(t, 10*time.Second, "both settled", func() bool { return env.settled("TEST", "fn", 2) })

	var ping micro.Ping
	env.request("$SRV.PING.fn", &ping)
	if ping.Name != "fn" || ping.Version != "1.2.3" {
		t.Errorf("PING = %+v, want fn 1.2.3", ping)
	}
	var info micro.Info
	env.request("$SRV.INFO.fn", &info)
	for k, want := range map[string]string{"stream": "TEST", "consumer": "fn", "subject": "test.in", "ack_wait": "3s", "max_deliver": "5", "heartbeat": "1s"} {
		if got := info.Metadata[k]; got != want {
			t.Errorf("INFO metadata %s = %q, want %q", k, got, want)
		}
	}
	if len(info.Endpoints) != 2 || info.Endpoints[0].Subject != "fn.status" || info.Endpoints[1].Subject != "fn.runs" {
		t.Errorf("INFO endpoints %+v, want fn.status and fn.runs", info.Endpoints)
	}
	var stats micro.Stats
	env.request("$SRV.STATS.fn", &stats)
	if len(stats.Endpoints) != 2 || !strings.Contains(string(stats.Endpoints[1].Data), `"capacity":200`) {
		t.Fatalf("STATS endpoints %+v, want status and runs (its capacity as data)", stats.Endpoints)
	}
	var counters wire.Stats
	if err := json.Unmarshal(stats.Endpoints[0].Data, &counters); err != nil {
		t.Fatal(err)
	}
	if counters.Handled != 2 || counters.Acked != 1 || counters.DeadLettered != 1 || counters.Termed != 1 ||
		counters.LastError == "" || counters.NumPending != 0 || counters.NumAckPending != 0 {
		t.Errorf("STATS data %+v, want 2 handled, 1 acked, 1 dead-lettered and termed, a last error, nothing pending", counters)
	}
	var status wire.Stats
	env.request("fn.status", &status)
	if status.Handled != 2 || status.Function != "fn" {
		t.Errorf("status endpoint %+v, want the same counters", status)
	}
}

func (e *testEnv) request(subject string, v any) {
	e.t.Helper()
	msg, err := e.nc.Request(subject, nil, 5*time.Second)
	if err != nil {
		e.t.Fatalf("request %s: %v", subject, err)
	}
	if err := json.Unmarshal(msg.Data, v); err != nil {
		e.t.Fatalf("reply of %s: %v", subject, err)
	}
}
