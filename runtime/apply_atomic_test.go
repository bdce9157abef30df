package runtime

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// twoFunctions is a manifest with fn (reading test.in, with the given
// config block) and fn2 (reading test.other).
func twoFunctions(t *testing.T, fnLines string, withFn2 bool) *manifest.Manifest {
	t.Helper()
	text := `
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - name: fn
    version: 1.0.0
    stream: TEST
    subject: test.in
` + fnLines
	if withFn2 {
		text += "  - {name: fn2, version: 1.0.0, stream: TEST, subject: test.other}\n"
	}
	m, err := manifest.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// refusingConstructor fails when its config block says refuse: true, as a
// function refuses a bad config value.
func refusingConstructor(h jetfn.Handler) jetfn.Constructor {
	return func(d jetfn.Deps) (jetfn.Handler, error) {
		var cfg struct {
			Refuse bool `yaml:"refuse"`
		}
		if err := d.Config.Decode(&cfg); err != nil {
			return nil, err
		}
		if cfg.Refuse {
			return nil, errors.New("refuse: the config says so")
		}
		return h, nil
	}
}

// TestApplyRefusedChangesNothing: a revision that removes fn2 and gives fn a
// config its constructor refuses must leave both functions running as
// they were. Before the fix Apply removed fn2 first, then failed on fn:
// fn2 was gone while status said the previous manifest ran.
func TestApplyRefusedChangesNothing(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	fns := []jetfn.Function{{Name: "fn", New: refusingConstructor(rec)}, {Name: "fn2", New: refusingConstructor(rec)}}
	rt, err := New(env.nc, twoFunctions(t, "    ackWait: 5s\n", true), fns, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	bad := twoFunctions(t, "    ackWait: 2s\n    config: {refuse: true}\n", false)
	if err := rt.Apply(context.Background(), bad); !errors.Is(err, ErrRefusedManifest) {
		t.Fatalf("Apply = %v, want a refusal", err)
	}
	var names []string
	for _, s := range rt.Stats() {
		names = append(names, s.Function)
		if !strings.Contains(s.ManifestRefused, "refuse: the config says so") {
			t.Errorf("%s status manifest_refused = %q, want the reason", s.Function, s.ManifestRefused)
		}
	}
	if len(names) != 2 {
		t.Fatalf("bound after the refused Apply: %v, want fn and fn2", names)
	}
	if got := env.consumerInfo("TEST", "fn").Config.AckWait; got != 5*time.Second {
		t.Errorf("fn's consumer ackWait = %s, want the running manifest's 5s", got)
	}
	env.publish("test.other", "x")
	runtimetest.Eventually(t, 10*time.Second, "fn2 still handling", func() bool { return rec.count() == 1 })
}

// TestApplyLowerAckWaitKeepsInFlight: lowering ackWait live must not get
// the old binding's running message redelivered. Before the fix the old
// binding kept beating on its own heartbeat (1s) while the consumer's new
// ackWait (1s) ran out between two beats.
func TestApplyLowerAckWaitKeepsInFlight(t *testing.T) {
	env := newEnv(t)
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var deliveries []uint64
	h := jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
		mu.Lock()
		deliveries = append(deliveries, msg.NumDelivered)
		mu.Unlock()
		select {
		case started <- struct{}{}:
		default:
		}
		time.Sleep(4 * time.Second)
		return nil
	})
	fns := []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return h, nil }}}
	rt, err := New(env.nc, twoFunctions(t, "    ackWait: 3s\n", false), fns, WithLogger(testLogger()),
		WithDrainTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.publish("test.in", "slow")
	<-started
	if err := rt.Apply(context.Background(), twoFunctions(t, "    ackWait: 1s\n", false)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deliveries) != 1 {
		t.Fatalf("deliveries %v, want the one in-flight delivery only", deliveries)
	}
}

// TestOtherManifestOnConsumerWarns: an instance whose manifest configures a
// consumer differently from the manifest that configured it last says so,
// naming both digests. Before the fix the consumer did not record which
// manifest configured it, and the overwrite was silent.
func TestOtherManifestOnConsumerWarns(t *testing.T) {
	env := newEnv(t)
	first := testManifest(t, "    ackWait: 2s\n")
	r := env.start(first, &recorder{})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var logs runtimetest.LogBuffer
	second := testManifest(t, "    ackWait: 3s\n")
	rt, err := New(env.nc, second, []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return &recorder{}, nil }}},
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	if got := env.consumerInfo("TEST", "fn").Config.Metadata["jetfn.manifest_digest"]; got != second.Digest {
		t.Errorf("consumer metadata jetfn.manifest_digest = %q, want %q", got, second.Digest)
	}
	for _, want := range []string{"configured by another manifest", first.Digest, second.Digest} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestApplyChecksConfig: a live revision whose config block has a typo is
// refused before anything changes, naming the key and its manifest line.
// Before the fix the block was checked only by the constructor, at bind
// time, after the removals had happened.
func TestApplyChecksConfig(t *testing.T) {
	env := newEnv(t)
	check := func(c jetfn.Config) error {
		var cfg struct {
			Quiet time.Duration `yaml:"quiet"`
		}
		return c.Decode(&cfg)
	}
	rec := &recorder{}
	fns := []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return rec, nil }, CheckConfig: check},
		{Name: "fn2", New: func(jetfn.Deps) (jetfn.Handler, error) { return rec, nil }}}
	rt, err := New(env.nc, twoFunctions(t, "    config: {quiet: 1s}\n", true), fns, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	err = rt.Apply(context.Background(), twoFunctions(t, "    config:\n      quiett: 2s\n", false))
	if !errors.Is(err, ErrRefusedManifest) || !strings.Contains(err.Error(), "line 11: quiett") {
		t.Fatalf("Apply = %v, want a refusal naming quiett and its line", err)
	}
	if s := rt.Stats(); len(s) != 2 {
		t.Fatalf("bound after the refused Apply: %d functions, want both", len(s))
	}
}

// TestApplyDrainsSideBySide: the bindings an Apply replaces drain at the
// same time, so a shutdown waiting on the Apply waits one drain timeout,
// not one per function. Each handler outlives the drain timeout and then
// waits briefly for the others to be cancelled too: side by side they all
// are; one after another, the first returns before the second's drain even
// began. Before the fix Apply drained the replaced bindings one by one.
func TestApplyDrainsSideBySide(t *testing.T) {
	env := newEnv(t)
	var cancelled atomic.Int32
	var sawAll atomic.Int32
	running := make(chan struct{}, 3)
	h := jetfn.HandlerFunc(func(ctx context.Context, _ jetfn.Msg) error {
		running <- struct{}{}
		<-ctx.Done()
		cancelled.Add(1)
		deadline := time.Now().Add(500 * time.Millisecond)
		for cancelled.Load() < 3 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if cancelled.Load() == 3 {
			sawAll.Add(1)
		}
		return ctx.Err()
	})
	three := func(ackWait string) *manifest.Manifest {
		m, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: a, version: 1.0.0, stream: TEST, subject: test.a, ackWait: ` + ackWait + `}
  - {name: b, version: 1.0.0, stream: TEST, subject: test.b, ackWait: ` + ackWait + `}
  - {name: c, version: 1.0.0, stream: TEST, subject: test.c, ackWait: ` + ackWait + `}
`))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ctor := func(jetfn.Deps) (jetfn.Handler, error) { return h, nil }
	rt, err := New(env.nc, three("5s"), []jetfn.Function{{Name: "a", New: ctor}, {Name: "b", New: ctor}, {Name: "c", New: ctor}},
		WithLogger(testLogger()), WithDrainTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	for _, s := range []string{"test.a", "test.b", "test.c"} {
		env.publish(s, "x")
	}
	for range 3 {
		<-running
	}
	if err := rt.Apply(context.Background(), three("6s")); err != nil {
		t.Fatal(err)
	}
	if n := sawAll.Load(); n != 3 {
		t.Fatalf("%d of 3 drained handlers saw the other drains under way, want 3: the drains ran one after another", n)
	}
}
