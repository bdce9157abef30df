package runtime

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestOrderedRolledBackToUnordered: a deploy that made a function ordered
// is rolled back, live or while every instance is down. The plain consumer
// made then takes up where the ordered function got to: what it handled is
// not handled again, what still waited in its keyed stream (a failing
// message, held) is handled, once. Before, the consumer started at the
// input's first message, and with a header key after a restart it started
// after the router's floor, past the held message: lost.
func TestOrderedRolledBackToUnordered(t *testing.T) {
	for _, key := range []manifest.KeySpec{{Header: "Order-Id"}, {Token: 2}} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v restart=%v", key, restart), func(t *testing.T) {
				testRolledBackToUnordered(t, key, restart, false)
			})
		}
	}
	// The function was plain before it was ordered: its old consumer is
	// still there, where it stopped, and is moved up.
	t.Run("returning consumer", func(t *testing.T) {
		testRolledBackToUnordered(t, manifest.KeySpec{Header: "Order-Id"}, false, true)
	})
}

func testRolledBackToUnordered(t *testing.T, key manifest.KeySpec, restart, wasPlain bool) {
	env := newEnv(t)
	// The ordered function retries the held message after 30 s, long after
	// the rollback: only the plain consumer can handle it in time.
	ordered := keyedManifest(t, "    ordered: true\n    concurrency: 2\n    partitions: 2\n    backoff: [30s]\n")
	ordered.Functions[0].Key = &key
	unordered := keyedManifest(t, "    concurrency: 2\n    backoff: [50ms]\n")
	unordered.Functions[0].Key = nil
	h := &heldUntilReadded{handled: map[string]int{}}
	h.holding.Store(true)
	publish := env.publishKeyed
	want := map[string]int{"before-0": 1, "before-1": 1, "before-2": 1, "held": 1, "late": 1}
	var r *running
	if wasPlain {
		r = env.start(unordered, h)
		publish("k2", "first")
		want["first"] = 1
		runtimetest.Eventually(t, 20*time.Second, "the first one handled", func() bool { return env.settled("TEST", "fn", 1) })
		ordered.Functions[0].Start = manifest.StartNew // from the deploy on: the old consumer has handled what came before
		if err := r.rt.Apply(context.Background(), ordered); err != nil {
			t.Fatal(err)
		}
	} else {
		r = env.start(ordered, h)
	}
	for i := range 3 {
		publish(fmt.Sprintf("k%d", i), fmt.Sprintf("before-%d", i))
	}
	publish("k0", "held")
	runtimetest.Eventually(t, 20*time.Second, "three handled, the held one run", func() bool {
		got := h.snapshot()
		return got["before-0"]+got["before-1"]+got["before-2"] == 3 && got[heldRun] > 0
	})
	if restart {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		h.holding.Store(false)
		plans, err := PlanStarts(context.Background(), env.js, unordered)
		if err != nil {
			t.Fatal(err)
		}
		if len(plans) != 1 || !strings.Contains(plans[0].Start, "resumes after ack floor 3 (handled in key order through keyed stream JETFN_KEYED_fn") {
			t.Fatalf("jetfn check --server would say %+v; want the consumer to resume after what the ordered function handled", plans)
		}
		env.start(unordered, h)
	} else {
		h.holding.Store(false)
		if err := r.rt.Apply(context.Background(), unordered); err != nil {
			t.Fatal(err)
		}
	}
	publish("k1", "late")
	runtimetest.Eventually(t, 20*time.Second, "the late one and the held one handled", func() bool {
		got := h.snapshot()
		return got["late"] > 0 && got["held"] > 0
	})
	runtimetest.Eventually(t, 10*time.Second, "everything acknowledged", func() bool {
		return env.settled("TEST", "fn", uint64(len(want)))
	})
	got := h.snapshot()
	delete(got, heldRun)
	if !maps.Equal(got, want) {
		t.Fatalf("handled %v; want %v: each once", got, want)
	}
}
