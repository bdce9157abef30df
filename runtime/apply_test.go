package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestApplyPrune removes a function with WithPrune: it is drained and
// unbound and its durable consumer is deleted; the other function stays.
func TestApplyPrune(t *testing.T) {
	env := newEnv(t)
	both, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: fn, version: 1.0.0, stream: TEST, subject: test.in}
  - {name: fn2, version: 1.0.0, stream: TEST, subject: test.other}
`))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	fns := []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return rec, nil }},
		{Name: "fn2", New: func(jetfn.Deps) (jetfn.Handler, error) { return rec, nil }}}
	rt, err := New(env.nc, both, fns, WithLogger(testLogger()), WithPrune())
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	one := testManifest(t, "")
	if err := rt.Apply(context.Background(), one); err != nil {
		t.Fatal(err)
	}
	if s := rt.Stats(); len(s) != 1 || s[0].Function != "fn" {
		t.Fatalf("bound after Apply: %+v, want only fn", s)
	}
	if _, err := env.js.Consumer(context.Background(), "TEST", "fn2"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("fn2's consumer: %v, want it deleted", err)
	}
	env.publish("test.in", "x")
	runtimetest.Eventually(t, 10*time.Second, "fn still handling", func() bool { return rec.count() == 1 })
}
