package runtime

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestPriorityHeaderSkipsTheBuffer: with one worker busy, messages that
// carry the priority header run before the ones buffered ahead of them.
// The normal ones take 50ms each, so an urgent one that reached the
// buffer a little after the worker came free still overtakes all but the
// first of them.
func TestPriorityHeaderSkipsTheBuffer(t *testing.T) {
	env := newEnv(t)
	gate := make(chan struct{})
	var mu sync.Mutex
	var order []string
	h := jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
		if string(msg.Data) == "first" {
			<-gate
		} else if msg.Header.Get("Urgent") == "" {
			time.Sleep(50 * time.Millisecond) // a slow handler, not a wait for the test
		}
		mu.Lock()
		order = append(order, string(msg.Data))
		mu.Unlock()
		return nil
	})
	m := testManifest(t, "    concurrency: 1\n    prefetch: 10\n    priorityHeader: Urgent\n")
	r := env.start(m, h)
	env.publish("test.in", "first")
	for _, p := range []struct {
		data   string
		urgent bool
	}{{"n1", false}, {"n2", false}, {"u1", true}, {"n3", false}, {"u2", true}, {"n4", false}} {
		msg := nats.NewMsg("test.in")
		msg.Data = []byte(p.data)
		if p.urgent {
			msg.Header.Set("Urgent", "yes")
		}
		if _, err := env.js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	// Received, not only sent: under load the server's deliveries can
	// still wait in the subscription when the worker comes free.
	runtimetest.Eventually(t, 10*time.Second, "all six waiting in the instance's buffer", func() bool {
		return r.rt.bindingOf(t, "fn").unsettled.count(stateBuffered) == 6
	})
	close(gate)
	runtimetest.Eventually(t, 20*time.Second, "all seven acked", func() bool { return r.rt.statsOf(t, "fn").Acked == 7 })
	mu.Lock()
	defer mu.Unlock()
	at := func(s string) int { return slices.Index(order, s) }
	if at("first") != 0 || at("u1") > 2 || at("u2") > 2 || at("u1") > at("u2") {
		t.Fatalf("handled %v; want first, then u1 and u2 (at most one normal message before them), u1 before u2", order)
	}
	if at("n1") > at("n2") || at("n2") > at("n3") || at("n3") > at("n4") {
		t.Fatalf("handled %v; want the normal messages in order", order)
	}
}
