package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// permsManifest has one function that publishes an output.
func permsManifest(t *testing.T) *manifest.Manifest {
	m := testManifest(t, "    ackWait: 300ms\n    heartbeat: 100ms\n    maxDeliver: 2\n    concurrency: 3\n"+
		"    outputs:\n      - subject: test.out\n        stream: TEST\n")
	if err := m.Validate([]string{"fn"}); err != nil {
		t.Fatal(err)
	}
	return m
}

// permsHandler publishes each payload as an output; a "slow" one outlives
// ackWait, so it needs heartbeats: several acks to one reply subject.
func permsHandler(deps jetfn.Deps) (jetfn.Handler, error) {
	return jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
		if string(msg.Data) == "slow" {
			time.Sleep(400 * time.Millisecond)
		}
		return deps.Publisher.Publish(ctx, "test.out", msg.Data, "out:"+string(msg.Data))
	}), nil
}

// TestGeneratedPermissionsSufficient runs the runtime as a user with exactly
// the generated permissions (streams provisioned by an admin), and checks
// every route works: handling, output, dead letter of an exhausted message
// (and of one a crash left dead-lettered already), micro.
func TestGeneratedPermissionsSufficient(t *testing.T) {
	m := permsManifest(t)
	p := startPermsCase(t, m, m.Permissions(manifest.PermissionOptions{}), false)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runtime log:\n%s", p.log.String())
		}
	})
	// Both lost messages settled: one dead letter stored, one found
	// stored already.
	runtimetest.Eventually(t, 20*time.Second, "outputs and dead letters", func() bool {
		return p.env.streamMsgs("DEADLETTER") == 2 && p.outputs() == 2 && p.env.settled("TEST", "fn", 4)
	})
	if _, err := p.admin.Request("$SRV.PING.fn", nil, 5*time.Second); err != nil {
		t.Fatalf("micro PING: %v", err)
	}
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the generated permissions: %v", v)
	}
}

// TestProvisionPermissionsSufficient runs the runtime as a user with the
// --provision permissions on an empty server: it creates every stream and
// its consumer itself, then works, and recreates its consumer when an
// operator deletes it.
func TestProvisionPermissionsSufficient(t *testing.T) {
	m := permsManifest(t)
	p := startPermsCase(t, m, m.Permissions(manifest.PermissionOptions{Provision: true}), true)
	runtimetest.Eventually(t, 20*time.Second, "outputs", func() bool { return p.outputs() == 2 })
	// A filter change: test.other's stored message is handed over by a
	// backfill consumer, after a reset of the main one.
	p.env.publish("test.other", "other")
	widened := filterManifest(t, "    ackWait: 300ms\n    heartbeat: 100ms\n    maxDeliver: 2\n    concurrency: 3\n"+
		"    outputs:\n      - subject: test.out\n        stream: TEST\n", "test.in", "test.other")
	if err := p.rt.Apply(context.Background(), widened); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 20*time.Second, "the output of the handed-over message", func() bool { return p.outputs() == 3 })
	if err := p.env.js.DeleteConsumer(context.Background(), "TEST", "fn"); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 20*time.Second, "the consumer recreated", func() bool {
		_, err := p.env.js.Consumer(context.Background(), "TEST", "fn")
		return err == nil
	})
	p.env.publish("test.in", "after")
	runtimetest.Eventually(t, 20*time.Second, "the output after the recreation", func() bool { return p.outputs() == 4 })
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the --provision permissions: %v\n%s", v, p.log.String())
	}
}

// TestPermissionOptions checks the rights each option adds to the base
// set, and that none adds a subscription.
func TestPermissionOptions(t *testing.T) {
	m := permsManifest(t)
	base := m.Permissions(manifest.PermissionOptions{})
	tests := []struct {
		name string
		opts manifest.PermissionOptions
		want []string
	}{
		{name: "provision", opts: manifest.PermissionOptions{Provision: true}, want: []string{
			"$JS.API.STREAM.CREATE.KV_jetfn-positions", "$JS.API.STREAM.CREATE.KV_jetfn-attempts", "$JS.API.INFO",
			"$JS.API.DIRECT.GET.KV_jetfn-positions.$KV.jetfn-positions.consumer.TEST.fn",
			"$JS.API.DIRECT.GET.KV_jetfn-positions.$KV.jetfn-positions.function.TEST.fn",
			"$JS.API.DIRECT.GET.KV_jetfn-positions.$KV.jetfn-positions.scope.TEST.*",
			// A schedule an earlier revision kept, to end (runtime/schedule.go).
			"test.in.jetfn-schedule", "$JS.API.STREAM.MSG.GET.TEST", "$JS.API.DIRECT.GET.TEST.test.in.jetfn-schedule",
			// How far the function got if a revision ordered it (runtime/unkeyed.go).
			"$JS.API.STREAM.INFO.JETFN_KEYED_fn", "$JS.API.STREAM.MSG.GET.JETFN_KEYED_fn", "$JS.API.CONSUMER.INFO.TEST.fn-router",
			"$JS.API.CONSUMER.CREATE.TEST.fn", "$JS.API.CONSUMER.CREATE.TEST.fn.>",
			// A deploy turning debounce on or off looks for the other mode's consumer.
			"$JS.API.CONSUMER.INFO.TEST.fn-debouncer",
			"$JS.API.CONSUMER.RESET.TEST.fn", "$JS.API.CONSUMER.PAUSE.TEST.fn",
			"$JS.API.CONSUMER.CREATE.TEST.fn-backfill-a", "$JS.API.CONSUMER.CREATE.TEST.fn-backfill-a.>",
			"$JS.API.CONSUMER.INFO.TEST.fn-backfill-a", "$JS.API.CONSUMER.DELETE.TEST.fn-backfill-a",
			"$JS.API.CONSUMER.MSG.NEXT.TEST.fn-backfill-a", "$JS.ACK.TEST.fn-backfill-a.>",
			"$JS.API.CONSUMER.CREATE.TEST.fn-backfill-b", "$JS.API.CONSUMER.CREATE.TEST.fn-backfill-b.>",
			"$JS.API.CONSUMER.INFO.TEST.fn-backfill-b", "$JS.API.CONSUMER.DELETE.TEST.fn-backfill-b",
			"$JS.API.CONSUMER.MSG.NEXT.TEST.fn-backfill-b", "$JS.ACK.TEST.fn-backfill-b.>",
			"$JS.API.STREAM.CREATE.TEST", "$JS.API.STREAM.UPDATE.TEST",
			"$JS.API.STREAM.CREATE.DEADLETTER", "$JS.API.STREAM.UPDATE.DEADLETTER",
		}},
		{name: "prune", opts: manifest.PermissionOptions{Prune: true}, want: []string{"$JS.API.CONSUMER.DELETE.TEST.fn"}},
		{name: "deployment", opts: manifest.PermissionOptions{Deployment: "app"}, want: []string{
			"$JS.API.STREAM.INFO.KV_jetfn-manifests",
			"$JS.API.DIRECT.GET.KV_jetfn-manifests.$KV.jetfn-manifests.app",
			"$JS.API.CONSUMER.CREATE.KV_jetfn-manifests.*.$KV.jetfn-manifests.app",
			"$JS.API.CONSUMER.DELETE.KV_jetfn-manifests.*",
			"$JS.FC.KV_jetfn-manifests.*.*",
		}},
		{name: "a dotted deployment key", opts: manifest.PermissionOptions{Deployment: "eu.app"}, want: []string{
			"$JS.API.STREAM.INFO.KV_jetfn-manifests",
			"$JS.API.DIRECT.GET.KV_jetfn-manifests.$KV.jetfn-manifests.eu.app",
			"$JS.API.CONSUMER.CREATE.KV_jetfn-manifests.*.$KV.jetfn-manifests.eu.app",
			"$JS.API.CONSUMER.DELETE.KV_jetfn-manifests.*",
			"$JS.FC.KV_jetfn-manifests.*.*",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := m.Permissions(tt.opts)
			added := slices.DeleteFunc(slices.Clone(got.Publish), func(s string) bool { return slices.Contains(base.Publish, s) })
			if !slices.Equal(added, tt.want) {
				t.Errorf("added publish rights:\n got %q\nwant %q", added, tt.want)
			}
			if !slices.Equal(got.Subscribe, base.Subscribe) {
				t.Errorf("subscribe rights changed: %q", got.Subscribe)
			}
		})
	}
}

// TestGeneratedPermissionsMinimal removes one permission at a time: each
// removal must show up as a clear permissions-violation error naming the
// refused subject, not as silently lost messages.
func TestGeneratedPermissionsMinimal(t *testing.T) {
	m := permsManifest(t)
	full := m.Permissions(manifest.PermissionOptions{})
	var cases []string
	cases = append(cases, prefixed("publish ", full.Publish)...)
	cases = append(cases, prefixed("subscribe ", full.Subscribe)...)
	for _, c := range cases {
		t.Run(c, func(t *testing.T) {
			perms := without(full, c)
			p := startPermsCase(t, m, perms, false)
			removed := strings.TrimPrefix(strings.TrimPrefix(c, "publish "), "subscribe ")
			runtimetest.Eventually(t, 20*time.Second, "a violation on "+removed, func() bool {
				_, _ = p.admin.Request("$SRV.PING.fn", nil, 50*time.Millisecond)
				return slices.ContainsFunc(p.log.Violations(), func(s string) bool { return manifest.SubjectCovered(s, removed) })
			})
			t.Logf("reported: %v", p.log.Violations())
		})
	}
}

func prefixed(prefix string, subjects []string) []string {
	out := make([]string, len(subjects))
	for i, s := range subjects {
		out[i] = prefix + s
	}
	return out
}

func without(p manifest.Permissions, c string) manifest.Permissions {
	drop := func(list []string, s string) []string {
		return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return x == s })
	}
	switch {
	case strings.HasPrefix(c, "publish "):
		p.Publish = drop(p.Publish, strings.TrimPrefix(c, "publish "))
	default:
		p.Subscribe = drop(p.Subscribe, strings.TrimPrefix(c, "subscribe "))
	}
	return p
}

// permsCase is a server with accounts, streams provisioned by an admin and
// a runtime running as the restricted user.
type permsCase struct {
	env   *testEnv
	admin *nats.Conn
	log   *runtimetest.LogBuffer
	rt    *Runtime
}

func (p *permsCase) outputs() int {
	s, err := p.env.js.Stream(context.Background(), "TEST")
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter("test.out"))
	if err != nil {
		return 0
	}
	return int(info.State.Subjects["test.out"])
}

// startPermsCase starts the server and the runtime as the restricted user.
// With perms from PermissionOptions{Provision: true} the runtime creates
// its streams and consumer itself; otherwise an admin does first.
func startPermsCase(t *testing.T, m *manifest.Manifest, perms manifest.Permissions, selfProvision bool) *permsCase {
	t.Helper()
	return startPermsCaseAfter(t, m, perms, selfProvision, nil, permsHandler)
}

// startPermsCaseAfter is startPermsCase with what an earlier deployment
// left on the server (seed runs as the admin before the runtime starts)
// and fn's handler made by newHandler, with extra options.
func startPermsCaseAfter(t *testing.T, m *manifest.Manifest, perms manifest.Permissions, selfProvision bool, seed func(jetstream.JetStream),
	newHandler func(jetfn.Deps) (jetfn.Handler, error), extra ...Option) *permsCase {
	t.Helper()
	url := runtimetest.StartAccountsServer(t, perms.ServerConfig())
	admin := runtimetest.Connect(t, strings.Replace(url, "nats://", "nats://admin:admin@", 1))
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	if seed != nil {
		seed(js)
	}
	env := &testEnv{t: t, nc: admin, js: js}
	opts := append([]Option{WithDrainTimeout(100 * time.Millisecond)}, extra...)
	if !selfProvision {
		provision(t, js, m)
		exhaustDeliveries(t, env)
		opts = append(opts, WithoutProvisioning())
	}
	log := &runtimetest.LogBuffer{}
	user, err := nats.Connect(strings.Replace(url, "nats://", "nats://jetfn:jetfn@", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(user.Close)
	opts = append(opts, WithLogger(slog.New(slog.NewTextHandler(log, nil))))
	// fn2 lets a test deploy a revision without fn (TestKeyedPrunePermissionsSufficient).
	rt, err := New(user, m, []jetfn.Function{{Name: "fn", New: newHandler}, {Name: "fn2", New: newHandler}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := rt.Run(ctx); err != nil {
			fmt.Fprintf(log, "Run: %v\n", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	if selfProvision {
		select {
		case <-rt.Ready():
		case <-done:
			t.Fatalf("Run ended before ready:\n%s", log.String())
		}
	}
	for _, payload := range []string{"ok", "slow"} {
		env.publish("test.in", payload)
	}
	return &permsCase{env: env, admin: admin, log: log, rt: rt}
}

// exhaustDeliveries plays an instance that died during every delivery of
// the "lost" and "repeat" messages: it takes them maxDeliver times and never
// settles them. The runtime's next pull gets each once more (the consumer's
// own MaxDeliver is unlimited) and must dead-letter it without the handler.
// "repeat" plays, besides, an instance that died after storing its dead
// letter and before its Term: the runtime's dead letter is acknowledged as a
// duplicate, and it reads the stored one back (the dead-letter stream's info
// and MSG.GET) to tell a repeat from an ID that names another message.
func exhaustDeliveries(t *testing.T, env *testEnv) {
	t.Helper()
	env.publish("test.in", "lost")
	ack, err := env.js.Publish(context.Background(), "test.in", []byte("repeat"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := env.js.Consumer(context.Background(), "TEST", "fn")
	if err != nil {
		t.Fatal(err)
	}
	for delivery := 1; delivery <= 2; delivery++ {
		batch, err := c.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for range batch.Messages() {
			n++
		}
		if n != 2 {
			t.Fatalf("delivery %d of the lost messages: got %d messages", delivery, n)
		}
	}
	// Their handlers ran at both deliveries: jetfn recorded the second
	// run of each as it started (attempts.go).
	recordSecondRun(t, env, "fn", ack.Sequence-1)
	recordSecondRun(t, env, "fn", ack.Sequence)
	storeDeadLetter(t, env, ack.Sequence)
}

// storeDeadLetter stores the dead letter that "fn" makes for TEST's message
// seq, as the instance that died before its Term left it.
func storeDeadLetter(t *testing.T, env *testEnv, seq uint64) {
	t.Helper()
	s, err := env.js.Stream(context.Background(), "TEST")
	if err != nil {
		t.Fatal(err)
	}
	identity := StreamIdentity(s.CachedInfo().Created)
	msg := nats.NewMsg("deadletter.fn")
	msg.Data = []byte("repeat")
	msg.Header.Set(jetstream.MsgIDHeader, DeadLetterMsgID("fn", "TEST", identity, seq))
	msg.Header.Set(wire.HeaderFunction, "fn")
	msg.Header.Set(wire.HeaderOriginalStream, "TEST")
	msg.Header.Set(wire.HeaderOriginalStreamIdentity, identity)
	msg.Header.Set(wire.HeaderStreamSequence, strconv.FormatUint(seq, 10))
	if _, err := env.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

func provision(t *testing.T, js jetstream.JetStream, m *manifest.Manifest) {
	t.Helper()
	ctx := context.Background()
	if openPositions(ctx, js, m, true, testLogger()).kv == nil || openAttempts(ctx, js, m, true, testLogger()).kv == nil {
		t.Fatal("creating jetfn's buckets failed")
	}
	for _, s := range m.Streams {
		if err := ensureStream(ctx, js, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range m.Functions {
		s, err := js.Stream(ctx, f.Stream)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ensureConsumer(ctx, s, f, m.Digest, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeyedPermissionsSufficient runs an ordered function as a user with
// the --provision permissions on an empty server: it creates the keyed
// stream and its partition consumers, and handles through them, and
// recreates its input stream when an operator deletes it, with no
// violation.
func TestKeyedPermissionsSufficient(t *testing.T) {
	t.Run("subject token", func(t *testing.T) { testKeyedPermissions(t, "{token: 3}") })
	t.Run("payload field, routed", func(t *testing.T) { testKeyedPermissions(t, "{field: id}") })
}

func testKeyedPermissions(t *testing.T, key string) {
	m := subjectManifest(t, "test.in.*", "    key: "+key+"\n    ordered: true\n    concurrency: 2\n"+
		"    outputs:\n      - subject: test.out\n        stream: TEST\n")
	if err := m.Validate([]string{"fn"}); err != nil {
		t.Fatal(err)
	}
	p := startPermsCase(t, m, m.Permissions(manifest.PermissionOptions{Provision: true}), true)
	p.env.publish("test.in.a", `{"id":"a"}`)
	p.env.publish("test.in.b", `{"id":"b"}`)
	runtimetest.Eventually(t, 20*time.Second, "the outputs of both keys", func() bool { return p.outputs() == 2 })
	ctx := context.Background()
	if err := p.env.js.DeleteStream(ctx, "TEST"); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 45*time.Second, "the input stream recreated", func() bool {
		_, err := p.env.js.Publish(ctx, "test.in.c", []byte(`{"id":"c"}`))
		return err == nil
	})
	// A token key's keyed stream sources the input: the server's source
	// retries with a backoff (TestKeyedInputStreamRecreated).
	runtimetest.Eventually(t, time.Minute, "the output of the message on the recreated stream", func() bool { return p.outputs() == 1 })
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the --provision permissions: %v\n%s", v, p.log.String())
	}
}

// TestKeyedPrunePermissionsSufficient: pruning a keyed function records
// how far it got (runtime/keyedresume.go) before deleting its keyed stream;
// with the --provision --prune permissions that takes no right they lack,
// and the function added back resumes there.
func TestKeyedPrunePermissionsSufficient(t *testing.T) {
	for _, key := range []string{"{token: 3}", "{field: id}"} {
		t.Run(key, func(t *testing.T) {
			m := subjectManifest(t, "test.in.*", "    key: "+key+"\n    ordered: true\n    concurrency: 2\n"+
				"    outputs:\n      - subject: test.out\n        stream: TEST\n")
			if err := m.Validate([]string{"fn"}); err != nil {
				t.Fatal(err)
			}
			// The permissions cover fn2 too, which the revision without fn runs.
			both := subjectManifest(t, "test.in.*", "")
			both.Functions = append(both.Functions, m.Functions[0])
			both.Functions[0].Name, both.Functions[0].Durable, both.Functions[0].Subject = "fn2", "fn2", "test.other"
			p := startPermsCaseAfter(t, m, both.Permissions(manifest.PermissionOptions{Provision: true, Prune: true}), true, nil,
				permsHandler, WithPrune())
			p.env.publish("test.in.a", `{"id":"a"}`)
			runtimetest.Eventually(t, 20*time.Second, "the first output", func() bool { return p.outputs() == 1 })
			none := subjectManifest(t, "test.other", "")
			none.Functions[0].Name, none.Functions[0].Durable = "fn2", "fn2"
			ctx := context.Background()
			if err := p.rt.Apply(ctx, none); err != nil {
				t.Fatal(err)
			}
			p.env.publish("test.in.b", `{"id":"b"}`)
			if err := p.rt.Apply(ctx, m); err != nil {
				t.Fatal(err)
			}
			runtimetest.Eventually(t, 20*time.Second, "the second output, and the first not again", func() bool { return p.outputs() == 2 })
			if !strings.Contains(p.log.String(), "recorded how far a pruned keyed function got") {
				t.Fatalf("the prune recorded no position:\n%s", p.log.String())
			}
			if v := p.log.Violations(); len(v) > 0 {
				t.Fatalf("permission violations with the --provision --prune permissions: %v\n%s", v, p.log.String())
			}
		})
	}
}

// TestDebouncedPermissionsSufficient runs a debounced function as a user
// with the --provision permissions on an empty server: it creates the
// debounce stream and both consumers, stores receipts and schedules,
// reads a key's last receipt and schedule before each run, and runs each
// key's burst once, with no violation.
func TestDebouncedPermissionsSufficient(t *testing.T) {
	m := subjectManifest(t, "test.in.*", "    key: {token: 3}\n    debounce: 1s\n"+
		"    outputs:\n      - subject: test.out\n        stream: TEST\n")
	if err := m.Validate([]string{"fn"}); err != nil {
		t.Fatal(err)
	}
	p := startPermsCase(t, m, m.Permissions(manifest.PermissionOptions{Provision: true}), true)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runtime log:\n%s", p.log.String())
		}
	})
	for i, subject := range []string{"test.in.a", "test.in.a", "test.in.b", "test.in.a"} {
		p.env.publish(subject, fmt.Sprintf("%s-%d", subject, i)) // the output's key: one per run
	}
	runtimetest.Eventually(t, 20*time.Second, "one output per key", func() bool { return p.outputs() == 2 })
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the --provision permissions: %v\n%s", v, p.log.String())
	}
}

// TestBackfillPermissionsSufficient: a routed or debounced function's
// filter is narrowed and rolled back by a user with the --provision
// permissions of the wide manifest: the backfill consumer of the router's
// or the debouncer's consumer is made, read and removed with no
// violation, and the message the narrow revision passed over is handled.
func TestBackfillPermissionsSufficient(t *testing.T) {
	// ackWait 2s: a message delivered to the old revision's pull request
	// as its drain began (100 ms here) is not the drain's to give back, and
	// comes back one ackWait later; with the default 30 s, later than the
	// wait below. A CI run timed out, most likely so: the debounced run came
	// due in the very second the rollback stopped the old revision (not
	// reproduced in 23 runs, 15 of them under load).
	outputs := "    ackWait: 2s\n    outputs:\n      - subject: test.out\n        stream: TEST\n"
	t.Run("routed", func(t *testing.T) { testBackfillPermissions(t, "    key: {field: id}\n    ordered: true\n"+outputs) })
	t.Run("debounced", func(t *testing.T) { testBackfillPermissions(t, "    key: {field: id}\n    debounce: 1s\n"+outputs) })
}

func testBackfillPermissions(t *testing.T, spec string) {
	wide := subjectManifest(t, "test.in.*", spec)
	narrow := subjectManifest(t, "test.in.a", spec)
	for _, m := range []*manifest.Manifest{wide, narrow} {
		if err := m.Validate([]string{"fn"}); err != nil {
			t.Fatal(err)
		}
	}
	p := startPermsCase(t, wide, wide.Permissions(manifest.PermissionOptions{Provision: true}), true)
	p.env.publish("test.in.b", `{"id":"b","n":1}`)
	runtimetest.Eventually(t, 20*time.Second, "the first output", func() bool { return p.outputs() == 1 })
	ctx := context.Background()
	if err := p.rt.Apply(ctx, narrow); err != nil {
		t.Fatal(err)
	}
	p.env.publish("test.in.b", `{"id":"b","n":2}`) // passed over by the narrow revision
	if err := p.rt.Apply(ctx, wide); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Log(p.log.String())
		}
	}()
	runtimetest.Eventually(t, 20*time.Second, "the passed-over message's output", func() bool { return p.outputs() == 2 })
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the --provision permissions: %v\n%s", v, p.log.String())
	}
}

// TestUnkeyedPermissionsSufficient: an ordered function rolled back to a
// plain one, as a user with the --provision permissions of both revisions.
// The plain consumer's creation reads how far the ordered function got
// (its keyed stream, its router's consumer, runtime/unkeyed.go) with no
// violation, and resumes after it: the first message is not handled again.
func TestUnkeyedPermissionsSufficient(t *testing.T) {
	for _, key := range []string{"{token: 3}", "{field: id}"} {
		t.Run(key, func(t *testing.T) {
			plainSpec := "    outputs:\n      - subject: test.out\n        stream: TEST\n"
			ordered := subjectManifest(t, "test.in.*", "    key: "+key+"\n    ordered: true\n    concurrency: 2\n"+plainSpec)
			plain := subjectManifest(t, "test.in.*", plainSpec)
			for _, m := range []*manifest.Manifest{ordered, plain} {
				if err := m.Validate([]string{"fn"}); err != nil {
					t.Fatal(err)
				}
			}
			opts := manifest.PermissionOptions{Provision: true}
			perms, plainPerms := ordered.Permissions(opts), plain.Permissions(opts)
			perms.Publish = append(perms.Publish, plainPerms.Publish...)
			perms.Subscribe = append(perms.Subscribe, plainPerms.Subscribe...)
			p := startPermsCaseAfter(t, ordered, perms, true, nil, permsHandler)
			p.env.publish("test.in.a", `{"id":"a"}`)
			runtimetest.Eventually(t, 20*time.Second, "the first output", func() bool { return p.outputs() == 1 })
			if err := p.rt.Apply(context.Background(), plain); err != nil {
				t.Fatal(err)
			}
			p.env.publish("test.in.b", `{"id":"b"}`)
			runtimetest.Eventually(t, 20*time.Second, "the second output", func() bool { return p.outputs() >= 2 })
			runtimetest.Eventually(t, 10*time.Second, "the plain consumer settled", func() bool { return p.env.settled("TEST", "fn", 1) })
			if n := p.outputs(); n != 2 {
				t.Fatalf("%d outputs; want 2: the first message not handled again\n%s", n, p.log.String())
			}
			if !strings.Contains(p.log.String(), "handled in key order through keyed stream") {
				t.Fatalf("the plain consumer did not resume after the ordered function:\n%s", p.log.String())
			}
			if v := p.log.Violations(); len(v) > 0 {
				t.Fatalf("permission violations with the --provision permissions of both revisions: %v\n%s", v, p.log.String())
			}
		})
	}
}
