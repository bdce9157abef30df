package metrics_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/metrics"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestServe serves a real runtime: /readyz fails before the functions are
// bound, passes once they are, and fails again when MongoDB goes away;
// /metrics carries the runtime's counters and the handler histogram.
func TestServe(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	// Not runtimetest.StartMongo: this test stops the server itself, and
	// devstack's Stop must run only once.
	mongoSrv, err := devstack.StartMongo("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var stopOnce sync.Once
	stopMongo := func() { stopOnce.Do(mongoSrv.Stop) }
	t.Cleanup(stopMongo)
	mongoClient := runtimetest.ConnectMongo(t, mongoSrv.URI)
	mx := metrics.New()
	rt := runtest.New(t, nc, runtest.Manifest, runtime.WithHandlerObserver(mx.ObserveHandler))
	srv, err := mx.Serve("127.0.0.1:0", rt, metrics.Probes{NATS: nc, Mongo: mongoClient})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + srv.Addr()

	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %q, want 200", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "fail functions") {
		t.Errorf("/readyz before Run = %d %q, want 503 naming the functions", code, body)
	}
	runtest.Run(t, rt)
	runtimetest.Eventually(t, 30*time.Second, "/readyz to pass", func() bool {
		code, _ := get(t, base+"/readyz")
		return code == http.StatusOK
	})

	for _, name := range []string{"a", "b", "poison", "flaky"} {
		runtest.Publish(t, nc, "test.in", `{"name":"`+name+`"}`, "")
	}
	// flaky fails twice (maxDeliver 2): a nak, then a dead letter.
	runtimetest.Eventually(t, 10*time.Second, "four settled", func() bool { return runtest.Settled(rt, "greeter", 4) })

	families := scrape(t, base+"/metrics")
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{name: "jetfn_handled_total", want: 5},
		{name: "jetfn_outcomes_total", labels: map[string]string{"outcome": "acked"}, want: 2},
		{name: "jetfn_outcomes_total", labels: map[string]string{"outcome": "retried"}, want: 1},
		{name: "jetfn_outcomes_total", labels: map[string]string{"outcome": "termed"}, want: 2},
		{name: "jetfn_outcomes_total", labels: map[string]string{"outcome": "dead_lettered"}, want: 2},
		{name: "jetfn_redeliveries_total", want: 1},
		{name: "jetfn_heartbeats_total", want: 0},
		{name: "jetfn_buffer_heartbeats_total", want: 0},
		{name: "jetfn_in_flight", want: 0},
		{name: "jetfn_consumer_pending", want: 0},
		{name: "jetfn_consumer_ack_pending", want: 0},
		{name: "jetfn_consumer_lag", want: 0},
		{name: "jetfn_handler_duration_seconds", want: 5}, // the histogram's count
	}
	for _, tt := range tests {
		t.Run(tt.name+labelString(tt.labels), func(t *testing.T) {
			got, ok := value(families[tt.name], map[string]string{"function": "greeter"}, tt.labels)
			if !ok || got != tt.want {
				t.Errorf("%s%s = %v (found %v), want %v", tt.name, labelString(tt.labels), got, ok, tt.want)
			}
		})
	}
	if families["go_goroutines"] == nil {
		t.Error("no Go runtime metrics")
	}

	stopMongo()
	var body string
	runtimetest.Eventually(t, 10*time.Second, "/readyz to fail without MongoDB", func() bool {
		var code int
		code, body = get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "fail mongo")
	})
	t.Logf("/readyz without MongoDB:\n%s", body)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return families
}

// value finds the sample whose labels include all of want; a histogram
// gives its count.
func value(f *dto.MetricFamily, want ...map[string]string) (float64, bool) {
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for _, w := range want {
			for k, v := range w {
				if have[k] != v {
					continue next
				}
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func labelString(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	return "/" + l["outcome"]
}
