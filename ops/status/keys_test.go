package status_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/ops/status"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestStatusNamesStuckKeys: an ordered function's instance reports its
// partitions, and a key whose head message keeps failing is listed by name
// with its error under the functions, its next message held behind it.
func TestStatusNamesStuckKeys(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	keyed := strings.NewReplacer("subject: test.in", "subject: test.*\n    key: {token: 2}\n    ordered: true",
		"maxDeliver: 2", "maxDeliver: 10", "backoff: [10ms]", "backoff: [500ms]").Replace(runtest.Manifest)
	runtest.Start(t, nc, keyed)
	runtest.Publish(t, nc, "test.acme", `{"name":"flaky"}`, "")
	runtest.Publish(t, nc, "test.acme", `{"name":"after"}`, "")
	var instances []status.Instance
	runtimetest.Eventually(t, 20*time.Second, "the stuck key reported", func() bool {
		var err error
		instances, err = status.Collect(context.Background(), nc, status.DefaultWindow)
		return err == nil && len(instances) == 1 && len(instances[0].Stats.StuckKeys) == 1
	})
	var buf bytes.Buffer
	if err := status.WriteTable(&buf, instances, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KEYED FUNCTION", "STUCK KEY", "acme", "flaky", instances[0].ID} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	if s := instances[0].Stats; s.HeldByKey != 1 || s.Partitions != 2 {
		t.Errorf("stats %+v: want 1 message held by its key, 2 partitions", s)
	}
}

// TestStatusShowsDebouncedFunction: a debounced function's instance
// reports its period, the input its debouncer has yet to take and the
// runs come due, in a table of their own.
func TestStatusShowsDebouncedFunction(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	debounced := strings.NewReplacer("subject: test.in", "subject: test.*\n    key: {token: 2}\n    debounce: 1h").Replace(runtest.Manifest)
	runtest.Start(t, nc, debounced)
	runtest.Publish(t, nc, "test.acme", `{"name":"first"}`, "")
	runtest.Publish(t, nc, "test.acme", `{"name":"second"}`, "")
	var instances []status.Instance
	runtimetest.Eventually(t, 20*time.Second, "both messages debounced, none due", func() bool {
		var err error
		instances, err = status.Collect(context.Background(), nc, status.DefaultWindow)
		if err != nil || len(instances) != 1 {
			return false
		}
		s := instances[0].Stats
		return s.Debounce == "1h0m0s" && s.DebouncePending == 0 && s.DueRuns == 0 && s.ConsumerError == ""
	})
	var buf bytes.Buffer
	if err := status.WriteTable(&buf, instances, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DEBOUNCED FUNCTION", "TO DEBOUNCE", "1h0m0s", instances[0].ID} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}
