package runtime

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestOrderedRolledBackToUnordered: a deploy that made a function ordered
// is rolled back. The unordered consumer made then takes up where the
// ordered function got to: what it handled is not handled again, what
// still waited in its keyed stream is handled, once.
func TestOrderedRolledBackToUnordered(t *testing.T) {
	for _, key := range []manifest.KeySpec{{Header: "Order-Id"}, {Token: 2}} {
		t.Run(fmt.Sprint(key), func(t *testing.T) {
			env := newEnv(t)
			ordered := keyedManifest(t, "    ordered: true\n    concurrency: 2\n    partitions: 2\n")
			ordered.Functions[0].Key = &key
			unordered := keyedManifest(t, "    concurrency: 2\n")
			unordered.Functions[0].Key = nil
			h := &heldUntilReadded{handled: map[string]int{}}
			h.holding.Store(true)
			publish := func(key, data string) {
				msg := nats.NewMsg("test." + key)
				msg.Header.Set("Order-Id", key)
				msg.Data = []byte(data)
				if _, err := env.js.PublishMsg(context.Background(), msg); err != nil {
					t.Fatal(err)
				}
			}
			r := env.start(ordered, h)
			for i := range 3 {
				publish(fmt.Sprintf("k%d", i), fmt.Sprintf("before-%d", i))
			}
			publish("k0", "held")
			runtimetest.Eventually(t, 20*time.Second, "three handled, the held one run", func() bool {
				got := h.snapshot()
				return got["before-0"]+got["before-1"]+got["before-2"] == 3 && got[heldRun] > 0
			})
			if err := r.rt.Apply(context.Background(), unordered); err != nil {
				t.Fatal(err)
			}
			h.holding.Store(false)
			publish("k1", "late")
			want := map[string]int{"before-0": 1, "before-1": 1, "before-2": 1, "held": 1, "late": 1}
			runtimetest.Eventually(t, 20*time.Second, "the late one and the held one handled", func() bool {
				got := h.snapshot()
				return got["late"] > 0 && got["held"] > 0
			})
			got := h.snapshot()
			delete(got, heldRun)
			if !maps.Equal(got, want) {
				t.Fatalf("handled %v; want %v: each once", got, want)
			}
		})
	}
}
