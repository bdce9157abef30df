package runtime

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// delayedManifest is fn with the delayed output test.later.
func delayedManifest(t *testing.T, extra string) *manifest.Manifest {
	t.Helper()
	return testManifest(t, "    backoff: [4s, 100ms]\n    maxDeliver: 3\n    outputs:\n      - {subject: test.later, stream: TEST, delayed: true}\n"+extra)
}

// delayer publishes test.later a second after each run, and fails its
// first two runs of a message: the second run comes after the output was
// published.
type delayer struct {
	pub  jetfn.Publisher
	mu   sync.Mutex
	runs int
	errs []error
}

func (d *delayer) Handle(ctx context.Context, msg jetfn.Msg) error {
	err := d.pub.PublishAt(ctx, "test.later", msg.Data, msg.ID(), time.Now().Add(time.Second))
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs++
	d.errs = append(d.errs, err)
	if err == nil && msg.NumDelivered < 3 {
		return errors.New("failing after the delayed publish")
	}
	return err
}

// TestDelayedOutputOnceThroughRetriesAndARestart: a handler that publishes
// a delayed output and fails is retried after the output was published
// and after nats-server restarted: the output is published once, at its
// time, carrying its ID.
func TestDelayedOutputOnceThroughRetriesAndARestart(t *testing.T) {
	dir := t.TempDir()
	ns := runtimetest.StartNATSIn(t, dir)
	nc := runtimetest.Connect(t, ns.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	env := &testEnv{t: t, nc: nc, js: js, logs: &runtimetest.LogBuffer{}}
	d := &delayer{}
	fns := []jetfn.Function{{Name: "fn", New: func(deps jetfn.Deps) (jetfn.Handler, error) { d.pub = deps.Publisher; return d, nil }}}
	rt, err := New(nc, delayedManifest(t, ""), fns, WithLogger(env.logger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	published := time.Now()
	env.publish("test.in", "hello")
	runtimetest.Eventually(t, 10*time.Second, "the delayed output", func() bool { return env.storedOn("test.later") == 1 })
	if took := time.Since(published); took < 900*time.Millisecond {
		t.Errorf("the output came %s after the publish, before its second", took)
	}
	port := ns.Addr().(*net.TCPAddr).Port
	devstack.StopNATS(ns)
	restarted, err := devstack.StartNATS(devstack.NATSOptions{Port: port, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devstack.StopNATS(restarted) })
	runtimetest.Eventually(t, 30*time.Second, "the third run", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.runs >= 3
	})
	runtimetest.Eventually(t, 10*time.Second, "the message settled", func() bool {
		info := env.consumerInfo("TEST", "fn")
		return info.NumAckPending == 0 && info.NumPending == 0
	})
	d.mu.Lock()
	for i, err := range d.errs {
		if err != nil {
			t.Errorf("run %d: PublishAt: %v", i+1, err)
		}
	}
	d.mu.Unlock()
	s, err := js.Stream(context.Background(), "TEST")
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.GetLastMsgForSubject(context.Background(), "test.later")
	if err != nil {
		t.Fatal(err)
	}
	if n := env.storedOn("test.later"); n != 1 || string(out.Data) != "hello" || !strings.HasPrefix(out.Header.Get(OutputIDHeader), "jetfn:fn:test.later:") {
		t.Fatalf("%d outputs on test.later, the last %q with ID %q; want one hello carrying its output ID", n, out.Data, out.Header.Get(OutputIDHeader))
	}
	if waiting, receipts := env.storedUnder("test.later.jetfn-delay.*"), env.storedUnder("test.later.jetfn-delay.*.sent"); waiting != 0 || receipts != 1 {
		t.Errorf("%d schedules still waiting and %d receipts, want none waiting (a retry scheduled it again) and one receipt", waiting, receipts)
	}
	if dup := rt.Stats()[0].DuplicateOutputs; dup != 2 {
		t.Errorf("%d duplicate outputs counted, want the two retries'", dup)
	}
}

// TestDelayedOutputRefusals: PublishAt to an output not declared delayed,
// or without a key, fails permanently, naming the fix.
func TestDelayedOutputRefusals(t *testing.T) {
	p := outputPublisher{function: "fn", outputs: []string{"test.now", "test.later"}, delayed: []string{"test.later"}}
	for _, c := range []struct{ subject, key, want string }{
		{"test.now", "k", "add delayed: true"},
		{"test.later", jetfn.NoDedup, "needs a key"},
		{"test.other", "k", "publishes only to"},
	} {
		err := p.PublishAt(context.Background(), c.subject, nil, c.key, time.Now())
		if !errors.Is(err, jetfn.ErrPermanent) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("PublishAt(%s, %q) = %v, want a permanent error saying %q", c.subject, c.key, err, c.want)
		}
	}
}

// TestDelayedOutputPermissionsSufficient: a function that publishes a
// delayed output, run as a user with the --provision permissions, makes
// its stream hold delayed outputs and publishes them, with no violation.
func TestDelayedOutputPermissionsSufficient(t *testing.T) {
	m := testManifest(t, "    outputs:\n      - {subject: test.out, stream: TEST, delayed: true}\n")
	if err := m.Validate([]string{"fn"}); err != nil {
		t.Fatal(err)
	}
	later := func(deps jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
			return deps.Publisher.PublishAt(ctx, "test.out", msg.Data, "out:"+string(msg.Data), time.Now())
		}), nil
	}
	p := startPermsCaseAfter(t, m, m.Permissions(manifest.PermissionOptions{Provision: true}), true, nil, later)
	runtimetest.Eventually(t, 20*time.Second, "both delayed outputs", func() bool { return p.outputs() == 2 })
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the --provision permissions: %v\n%s", v, p.log.String())
	}
}

// storedUnder counts the messages stream TEST holds on subjects matching
// filter.
func (e *testEnv) storedUnder(filter string) uint64 {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), "TEST")
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		e.t.Fatal(err)
	}
	var n uint64
	for _, count := range info.State.Subjects {
		n += count
	}
	return n
}

// TestTracingDelayedOutput: with tracing on, a delayed output gets its
// producer span, with the stream that stores it waiting.
func TestTracingDelayedOutput(t *testing.T) {
	env := newTracedEnv(t)
	m := testManifest(t, "    outputs:\n      - {subject: test.out, stream: TEST, delayed: true}\n")
	later := func(d jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
			return d.Publisher.PublishAt(ctx, "test.out", msg.Data, msg.ID(), time.Now())
		}), nil
	}
	rt, err := New(env.nc, m, []jetfn.Function{{Name: "fn", New: later}}, WithLogger(testLogger()), WithTracerProvider(env.tp))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.publishTraced("test.in", "hello", "in-1")
	send := env.spansNamed("send test.out", 1)[0]
	stream := ""
	for _, a := range send.Attributes {
		if a.Key == AttrStream {
			stream = a.Value.AsString()
		}
	}
	if stream != "TEST" {
		t.Errorf("send span attributes %v, want the stream TEST", send.Attributes)
	}
	runtimetest.Eventually(t, 10*time.Second, "the output", func() bool { return env.storedOn("test.out") == 1 })
}
