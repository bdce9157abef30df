package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/partition"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// keyedManifest has a function fn reading test.<key> in order of its key
// (the subject's second token), with the spec lines given.
func keyedManifest(t *testing.T, fnSpec string) *manifest.Manifest {
	t.Helper()
	return subjectManifest(t, "test.*", "    key: {token: 2}\n"+fnSpec)
}

// keyOrder is a handler that records every run per key, fails the first
// run of the messages fail picks, and notes any two runs of one key at
// once.
type keyOrder struct {
	mu      sync.Mutex
	running map[string]int
	runs    map[string][]jetfn.Msg // every run, in the order they started
	done    map[string][]uint64    // the sequences that succeeded
	overlap []string
	fail    func(jetfn.Msg) bool
	ok      int
	// keyOf reads a message's key; nil: the subject's second token.
	keyOf func(jetfn.Msg) string
}

func newKeyOrder(fail func(jetfn.Msg) bool) *keyOrder {
	return &keyOrder{running: map[string]int{}, runs: map[string][]jetfn.Msg{}, done: map[string][]uint64{}, fail: fail}
}

func (k *keyOrder) Handle(_ context.Context, msg jetfn.Msg) error {
	key := strings.TrimPrefix(msg.Subject, "test.")
	if k.keyOf != nil {
		key = k.keyOf(msg)
	}
	k.mu.Lock()
	k.running[key]++
	if k.running[key] > 1 {
		k.overlap = append(k.overlap, fmt.Sprintf("key %s: seq %d started while another ran", key, msg.StreamSequence))
	}
	k.runs[key] = append(k.runs[key], msg)
	k.mu.Unlock()
	time.Sleep(time.Duration(msg.StreamSequence%3) * time.Millisecond) // let partitions interleave
	failed := msg.NumDelivered == 1 && k.fail(msg)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running[key]--
	if failed {
		return errors.New("first run fails")
	}
	k.done[key] = append(k.done[key], msg.StreamSequence)
	k.ok++
	return nil
}

func (k *keyOrder) succeeded() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ok
}

// TestOrderedPerKeyAcrossInstances: two instances of an ordered function
// handle every key's messages one at a time in stream order, though
// every seventh message fails its first run and is retried: the messages
// behind it in its key wait for it. The handler sees the input stream's
// message, not the keyed stream's copy.
func TestOrderedPerKeyAcrossInstances(t *testing.T) {
	env := newEnv(t)
	m := keyedManifest(t, "    ordered: true\n    concurrency: 4\n    ackWait: 2s\n    backoff: [50ms]\n")
	h := newKeyOrder(func(msg jetfn.Msg) bool { return msg.StreamSequence%7 == 0 })
	env.start(m, h)
	env.start(m, h)
	const keys, each = 12, 25
	published := map[string][]uint64{}
	for i := range keys * each {
		key := fmt.Sprintf("k%d", i%keys)
		ack, err := env.js.Publish(context.Background(), "test."+key, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		published[key] = append(published[key], ack.Sequence)
	}
	runtimetest.Eventually(t, 30*time.Second, "every message handled", func() bool { return h.succeeded() >= keys*each })
	h.check(t, env, published, func(key string) string { return "test." + key })
}

// check fails t unless every key's messages succeeded in stream order,
// each once, no two runs of a key overlapped, no message ran before an
// earlier one of its key had succeeded, and the handler saw the input
// stream's message (its subject subjectOf the key).
func (k *keyOrder) check(t *testing.T, env *testEnv, published map[string][]uint64, subjectOf func(string) string) {
	t.Helper()
	in, err := env.js.Stream(context.Background(), "TEST")
	if err != nil {
		t.Fatal(err)
	}
	identity := StreamIdentity(in.CachedInfo().Created)
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.overlap) > 0 {
		t.Fatalf("runs of one key overlapped: %v", k.overlap)
	}
	for key, want := range published {
		if got := k.done[key]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("key %s succeeded in order %v, want %v (stream order, each once)", key, got, want)
		}
		var last uint64
		for _, run := range k.runs[key] {
			if run.StreamSequence < last {
				t.Errorf("key %s: seq %d ran after seq %d", key, run.StreamSequence, last)
			}
			last = run.StreamSequence
			if run.Stream != "TEST" || run.Subject != subjectOf(key) || run.StreamIdentity != identity {
				t.Fatalf("handler saw stream %s subject %s identity %s, want TEST, %s, %s (the input's message)",
					run.Stream, run.Subject, run.StreamIdentity, subjectOf(key), identity)
			}
		}
	}
}

// TestKeyedStuckKeyVisible: a key whose head message keeps failing holds
// its partition and is named in the function's status with its error;
// its next message is counted as held back by its key; other keys go on;
// readiness does not fail for it.
func TestKeyedStuckKeyVisible(t *testing.T) {
	env := newEnv(t)
	m := keyedManifest(t, "    ordered: true\n    concurrency: 2\n    partitions: 8\n    maxDeliver: 20\n    backoff: [300ms]\n")
	h := newKeyOrder(func(jetfn.Msg) bool { return false })
	failing := jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
		if msg.Subject == "test.bad" {
			return errors.New("boom")
		}
		return h.Handle(ctx, msg)
	})
	r := env.start(m, failing)
	var good []string
	for i := 0; len(good) < 3; i++ {
		if key := fmt.Sprintf("g%d", i); partition.Of([]byte(key), 8) != partition.Of([]byte("bad"), 8) {
			good = append(good, key)
		}
	}
	env.publish("test.bad", "1")
	env.publish("test.bad", "2")
	for _, key := range good {
		env.publish("test."+key, "x")
	}
	runtimetest.Eventually(t, 20*time.Second, "the other keys handled", func() bool { return h.succeeded() == len(good) })
	var s wire.Stats
	runtimetest.Eventually(t, 20*time.Second, "the stuck key in the status", func() bool {
		s = r.rt.Stats()[0]
		return len(s.StuckKeys) == 1 && s.StuckKeys[0].Deliveries >= 2
	})
	stuck := s.StuckKeys[0]
	if stuck.Key != "bad" || stuck.Partition != partition.Of([]byte("bad"), 8) || !strings.Contains(stuck.LastError, "boom") {
		t.Fatalf("stuck key %+v, want bad in partition %d failing with boom", stuck, partition.Of([]byte("bad"), 8))
	}
	if s.HeldByKey != 1 || s.KeysActive != 1 || s.OldestKey != "bad" || s.Partitions != 8 || s.PerKey != 1 {
		t.Fatalf("status %+v; want 1 message held by its key, 1 key active, oldest key bad, 8 partitions of 1", s)
	}
	if err := r.rt.ConsumerProblems(); err != nil {
		t.Fatalf("a stuck key made the runtime unready: %v", err)
	}
}

// TestRepartitionRefusedWhileMessagesWait: a deploy that changes a keyed
// function's partitions while its keyed stream holds messages is refused,
// by check --server and by the runtime: the waiting messages of a key
// would be overtaken by its new ones in another partition.
func TestRepartitionRefusedWhileMessagesWait(t *testing.T) {
	t.Run("subject token", func(t *testing.T) { testRepartitionRefused(t, nil) })
	t.Run("payload field", func(t *testing.T) { testRepartitionRefused(t, &manifest.KeySpec{Field: "id"}) })
}

func testRepartitionRefused(t *testing.T, key *manifest.KeySpec) {
	env := newEnv(t)
	spec := "    ordered: true\n    concurrency: 2\n    maxDeliver: 20\n    backoff: [1m]\n"
	keyed := func(spec string) *manifest.Manifest {
		m := keyedManifest(t, spec)
		if key != nil {
			m.Functions[0].Key = key
		}
		return m
	}
	r := env.start(keyed(spec), jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { return errors.New("not now") }))
	env.publish("test.a", `{"id":"a"}`)
	runtimetest.Eventually(t, 10*time.Second, "the message copied to the keyed stream", func() bool {
		return env.streamMsgs("JETFN_KEYED_fn") == 1
	})
	more := keyed(spec + "    partitions: 4\n")
	refusals, err := ServerRefusals(context.Background(), env.js, more)
	if err != nil || len(refusals) != 1 || !strings.Contains(refusals[0], "keyed stream JETFN_KEYED_fn holds 1 messages not yet handled") {
		t.Fatalf("check --server said %q, %v; want the repartition refused", refusals, err)
	}
	if err := r.rt.Apply(context.Background(), more); !errors.Is(err, ErrServerRefused) {
		t.Fatalf("Apply = %v, want ErrServerRefused", err)
	}
	if got := r.rt.Stats()[0].Partitions; got != 2 {
		t.Fatalf("runs %d partitions after the refusal, want the previous 2", got)
	}
}

// TestKeyConcurrencyBoundsEachKey: with keyConcurrency 2, two instances
// never run more than two messages of one key at once, and do run two.
func TestKeyConcurrencyBoundsEachKey(t *testing.T) {
	env := newEnv(t)
	m := keyedManifest(t, "    keyConcurrency: 2\n    concurrency: 4\n    partitions: 4\n")
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	var handled int
	h := jetfn.HandlerFunc(func(_ context.Context, msg jetfn.Msg) error {
		mu.Lock()
		running[msg.Subject]++
		most[msg.Subject] = max(most[msg.Subject], running[msg.Subject])
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // long enough for a second message of the key to start beside it
		mu.Lock()
		defer mu.Unlock()
		running[msg.Subject]--
		handled++
		return nil
	})
	env.start(m, h)
	env.start(m, h)
	for i := range 60 {
		env.publish(fmt.Sprintf("test.k%d", i%3), "x")
	}
	runtimetest.Eventually(t, 20*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled == 60
	})
	mu.Lock()
	defer mu.Unlock()
	reached := 0
	for key, n := range most {
		if n > 2 {
			t.Fatalf("key %s ran %d messages at once, want at most 2", key, n)
		}
		reached = max(reached, n)
	}
	if reached != 2 {
		t.Fatalf("no key ran 2 messages at once (most %v): keyConcurrency 2 ran one at a time", most)
	}
}

// fieldKey is the "id" field of a test payload {"id": ...}.
func fieldKey(msg jetfn.Msg) string {
	var p struct{ ID string }
	_ = json.Unmarshal(msg.Data, &p)
	return p.ID
}

// TestRoutedKeyOrderedAcrossInstances: keyed by a payload field, which the
// server cannot hash, an ordered function's messages are routed by one
// instance at a time; when the routing instance stops halfway, the other
// takes over the routing, and every key's messages still succeed in
// stream order, each once, through first-run failures. A message without
// the field is dead-lettered at once, saying why. The handler sees the
// publisher's Nats-Msg-Id, not the router's.
func TestRoutedKeyOrderedAcrossInstances(t *testing.T) {
	env := newEnv(t)
	spec := "    ordered: true\n    concurrency: 4\n    ackWait: 2s\n    backoff: [50ms]\n"
	m := keyedManifest(t, spec)
	m.Functions[0].Key = &manifest.KeySpec{Field: "id"}
	h := newKeyOrder(func(msg jetfn.Msg) bool { return msg.StreamSequence%7 == 0 })
	h.keyOf = fieldKey
	instances := []*running{env.start(m, h), env.start(m, h)}
	const keys, each = 8, 30
	published := map[string][]uint64{}
	publish := func(i int) {
		key := fmt.Sprintf("k%d", i%keys)
		ack, err := env.js.Publish(context.Background(), "test.any", []byte(`{"id":"`+key+`"}`),
			jetstream.WithMsgID(fmt.Sprintf("pub-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		published[key] = append(published[key], ack.Sequence)
	}
	for i := range keys * each / 2 {
		publish(i)
	}
	env.publish("test.any", `{"other":1}`)
	runtimetest.Eventually(t, 30*time.Second, "a quarter handled", func() bool { return h.succeeded() >= keys*each/4 })
	routing := slices.IndexFunc(instances, func(r *running) bool { return r.rt.leaseOf("router.fn", m, testLogger()).holds() })
	if routing < 0 {
		t.Fatal("no instance holds the router's lease")
	}
	if err := instances[routing].stop(t); err != nil { // the other takes over the routing
		t.Fatal(err)
	}
	for i := keys * each / 2; i < keys*each; i++ {
		publish(i)
	}
	runtimetest.Eventually(t, 60*time.Second, "every message handled", func() bool { return h.succeeded() >= keys*each })
	h.check(t, env, published, func(string) string { return "test.any" })
	survivor := instances[1-routing].rt.Stats()[0]
	if survivor.Router != "active" || survivor.RouterPending != 0 {
		t.Fatalf("the surviving instance's router is %q with %d messages to copy, want active with none", survivor.Router, survivor.RouterPending)
	}
	dl := env.deadLetters(1)
	if reason := dl[0].Header.Get(wire.HeaderError); !strings.Contains(reason, "field id is absent from the payload") {
		t.Fatalf("dead letter reason %q, want the missing key named", reason)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if id := h.runs["k0"][0].Header.Get("Nats-Msg-Id"); id != "pub-0" {
		t.Fatalf("handler saw Nats-Msg-Id %q, want the publisher's pub-0", id)
	}
}

// TestPruneRemovesKeyedStream: removing a keyed function with WithPrune
// deletes its keyed stream (its partitions with it) and its router's
// consumer, which would otherwise go on copying the input for no one.
func TestPruneRemovesKeyedStream(t *testing.T) {
	env := newEnv(t)
	keyed := keyedManifest(t, "    ordered: true\n    concurrency: 2\n")
	keyed.Functions[0].Key = &manifest.KeySpec{Header: "Order-Id"}
	removeFnWithPrune(t, env, keyed)
	if _, err := env.js.Stream(context.Background(), "JETFN_KEYED_fn"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("keyed stream after the prune: %v, want it deleted", err)
	}
	if _, err := env.js.Consumer(context.Background(), "TEST", "fn-router"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("router consumer after the prune: %v, want it deleted", err)
	}
}

// TestPruneRemovesDebounceStream: a removed debounced function leaves
// neither its debouncer's consumer, which would go on scheduling its input,
// nor its debounce stream.
func TestPruneRemovesDebounceStream(t *testing.T) {
	env := newEnv(t)
	removeFnWithPrune(t, env, debouncedManifest(t, "1s"))
	if _, err := env.js.Stream(context.Background(), manifest.DebounceStreamPrefix+"fn"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("debounce stream after the prune: %v, want it deleted", err)
	}
	if _, err := env.js.Consumer(context.Background(), "TEST", "fn-debouncer"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("debouncer consumer after the prune: %v, want it deleted", err)
	}
}

// removeFnWithPrune runs m's fn with pruning on, then applies a manifest
// without it (fn2 instead).
func removeFnWithPrune(t *testing.T, env *testEnv, m *manifest.Manifest) {
	t.Helper()
	h := jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { return nil })
	rt, err := New(env.nc, m, fnAndFn2(h), WithLogger(testLogger()), WithPrune())
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	if err := rt.Apply(context.Background(), fn2Only(t)); err != nil {
		t.Fatal(err)
	}
}

// TestKeyedAddedSubjectWarnsOfWhatItMayPassOver: a subject-token keyed
// function's keyed stream copies its input through the server's source,
// which takes up a subject added to it from where the source stands: what
// the input stored on it before may never be handled, and jetfn cannot hand
// it over in key order. So `check --server` names the subject and the
// runtime warns when it applies the change; a subject the old ones covered
// (a narrowing) is not reported.
func TestKeyedAddedSubjectWarnsOfWhatItMayPassOver(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	both := twoSubjectKeyed(t, `["test.a.*", "test.b.*"]`)
	r := env.start(both, rec)
	env.publish("test.a.k1", `{}`)
	env.publish("test.b.k1", `{}`)
	runtimetest.Eventually(t, 20*time.Second, "both first messages handled", func() bool { return rec.count() == 2 })
	awaitKeyedStreamEmpty(t, env)
	if err := r.rt.Apply(context.Background(), twoSubjectKeyed(t, `["test.a.*"]`)); err != nil {
		t.Fatal(err)
	}
	if logs := env.logs.String(); strings.Contains(logs, "subject added to a subject-token keyed function") {
		t.Fatalf("dropping a subject warned of an added one:\n%s", logs)
	}
	env.publish("test.b.k2", `{}`) // stored while the function reads test.a.* only
	env.publish("test.a.k5", `{}`) // copied: the source passes test.b.k2
	runtimetest.Eventually(t, 20*time.Second, "test.a.k5 handled", func() bool { return rec.count() == 3 })

	plans, err := PlanStarts(context.Background(), env.js, both)
	if err != nil {
		t.Fatal(err)
	}
	if got := plans[0].AddedSubjects; !slices.Equal(got, []string{"test.b.*"}) {
		t.Fatalf("check --server's plan AddedSubjects = %v, want [test.b.*]", got)
	}
	if err := r.rt.Apply(context.Background(), both); err != nil {
		t.Fatal(err)
	}
	if logs := env.logs.String(); !strings.Contains(logs, "subject added to a subject-token keyed function") ||
		!strings.Contains(logs, "subject=test.b.*") {
		t.Fatalf("the runtime did not warn of the added subject:\n%s", logs)
	}
	env.publish("test.b.k3", `{}`)
	runtimetest.Eventually(t, 20*time.Second, "the message after the re-add handled", func() bool { return rec.count() == 4 })
	rec.mu.Lock()
	last := rec.deliveries[3].msg.Subject
	rec.mu.Unlock()
	if last != "test.b.k3" {
		t.Fatalf("fourth run was %s, want test.b.k3: test.b.k2, which the source had passed, is not handled", last)
	}

	wide := newEnv(t)
	wide.start(twoSubjectKeyed(t, `["test.*.*"]`), &recorder{})
	plans, err = PlanStarts(context.Background(), wide.js, twoSubjectKeyed(t, `["test.a.*"]`))
	if err != nil || len(plans[0].AddedSubjects) != 0 {
		t.Fatalf("a narrowing: plan = %+v, %v; want no added subject (test.*.* covered test.a.*)", plans, err)
	}
}

// twoSubjectKeyed is fn reading subjects (a YAML list), keyed by the third
// token.
func twoSubjectKeyed(t *testing.T, subjects string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: fn, version: 1.0.0, stream: TEST, subjects: ` + subjects + `, key: {token: 3}, ordered: true, ackWait: 2s}
`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// awaitKeyedStreamEmpty waits until fn's keyed stream holds nothing: every
// copied message acknowledged, so its subjects may change.
func awaitKeyedStreamEmpty(t *testing.T, env *testEnv) {
	t.Helper()
	runtimetest.Eventually(t, 20*time.Second, "the keyed stream empty", func() bool {
		s, err := env.js.Stream(context.Background(), manifest.KeyedStreamPrefix+"fn")
		return err == nil && s.CachedInfo().State.Msgs == 0
	})
}

// TestKeyedReaddedAfterPrune: a deploy removes a keyed function with
// --prune (its keyed stream and router consumer are deleted), with one of
// its messages still waiting, held by a failing handler, or with none; a
// later deploy adds it back. As for any function (TestReaddedAfterPrune),
// it resumes where it got to: the waiting message and what was published
// in between are handled, and nothing it had handled before runs again.
func TestKeyedReaddedAfterPrune(t *testing.T) {
	for _, tt := range []struct {
		name string
		key  manifest.KeySpec
		hold bool
	}{
		{"subject token, one waiting", manifest.KeySpec{Token: 2}, true},
		{"subject token, none waiting", manifest.KeySpec{Token: 2}, false},
		{"header, one waiting", manifest.KeySpec{Header: "Order-Id"}, true},
		{"header, none waiting", manifest.KeySpec{Header: "Order-Id"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			keyed := keyedManifest(t, "    ordered: true\n    concurrency: 2\n    partitions: 2\n")
			keyed.Functions[0].Key = &tt.key
			h := &heldUntilReadded{handled: map[string]int{}}
			h.holding.Store(true)
			rt, err := New(env.nc, keyed, fnAndFn2(h), WithLogger(testLogger()), WithPrune())
			if err != nil {
				t.Fatal(err)
			}
			env.run(rt)
			publish := env.publishKeyed
			for i := range 3 {
				publish(fmt.Sprintf("k%d", i), fmt.Sprintf("before-%d", i))
			}
			want := map[string]int{"before-0": 1, "before-1": 1, "before-2": 1, "while-away": 1, "late": 1}
			if tt.hold {
				publish("k0", "held")
				want["held"] = 1
			}
			runtimetest.Eventually(t, 20*time.Second, "three handled, the held one run", func() bool {
				got := h.snapshot()
				return got["before-0"]+got["before-1"]+got["before-2"] == 3 && (got[heldRun] > 0) == tt.hold
			})
			if err := rt.Apply(context.Background(), fn2Only(t)); err != nil {
				t.Fatal(err)
			}
			publish("k1", "while-away")
			h.holding.Store(false)
			if err := rt.Apply(context.Background(), keyed); err != nil {
				t.Fatal(err)
			}
			publish("k2", "late")
			runtimetest.Eventually(t, 30*time.Second, "the late message handled and the keyed stream empty", func() bool {
				if h.snapshot()["late"] == 0 {
					return false
				}
				ks, err := env.js.Stream(context.Background(), "JETFN_KEYED_fn")
				return err == nil && ks.CachedInfo().State.Msgs == 0
			})
			got := h.snapshot()
			delete(got, heldRun)
			if !maps.Equal(got, want) {
				t.Fatalf("handled %v; want %v: each once, nothing from before the prune again", got, want)
			}
		})
	}
}

// heldUntilReadded counts successful runs by payload; it fails the
// message "held" while holding, counting those runs as heldRun.
type heldUntilReadded struct {
	mu      sync.Mutex
	handled map[string]int
	holding atomic.Bool
}

const heldRun = "held (failed run)"

func (h *heldUntilReadded) Handle(_ context.Context, msg jetfn.Msg) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if string(msg.Data) == "held" && h.holding.Load() {
		h.handled[heldRun]++
		return errors.New("held until the function is added back")
	}
	h.handled[string(msg.Data)]++
	return nil
}

func (h *heldUntilReadded) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.handled)
}

// fnAndFn2 registers h as fn and fn2, the function a manifest without fn
// runs instead (fn2Only).
func fnAndFn2(h jetfn.Handler) []jetfn.Function {
	return []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return h, nil }},
		{Name: "fn2", New: func(jetfn.Deps) (jetfn.Handler, error) { return h, nil }}}
}

// fn2Only is a manifest without fn: fn2 reads test.other instead.
func fn2Only(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: fn2, version: 1.0.0, stream: TEST, subject: test.other}
`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRouterConsumerDeletedWhileDown: `nats consumer rm` of an ordered
// function's router consumer and partition consumers while every instance
// is down (opscheck seed 20261212). The router made again at the next
// start resumes after what it had copied, so nothing handled before is
// handled again; before, it copied the whole input again, and past the
// keyed stream's duplicate window handled it all again.
func TestRouterConsumerDeletedWhileDown(t *testing.T) {
	env := newEnv(t)
	m := keyedManifest(t, "    ordered: true\n    concurrency: 2\n    partitions: 2\n")
	m.Functions[0].Key = &manifest.KeySpec{Header: "Order-Id"}
	h := &heldUntilReadded{handled: map[string]int{}}
	publish := env.publishKeyed
	first := env.start(m, h)
	for i := range 3 {
		publish(fmt.Sprintf("k%d", i), fmt.Sprintf("before-%d", i))
	}
	awaitHandledOnce(t, env, h, "before-0", "before-1", "before-2")
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	deleteKeyedConsumers(t, env, m.Functions[0])
	env.start(m, h)
	publish("k1", "late")
	awaitHandledOnce(t, env, h, "before-0", "before-1", "before-2", "late")
	// Within the keyed stream's duplicate window (10 minutes) copies made
	// again are dropped, as here; past it they are handled again, as in the
	// seed. So what counts is what the router read again: the late one only.
	if got := env.consumerInfo("TEST", m.Functions[0].RouterDurable()).Delivered.Consumer; got != 1 {
		t.Fatalf("the router made again read %d messages; want 1, the late one: it resumes after what it had copied", got)
	}
}

// awaitHandledOnce waits until h handled every one of want and the keyed
// stream is empty, then wants each handled exactly once and nothing else.
func awaitHandledOnce(t *testing.T, env *testEnv, h *heldUntilReadded, want ...string) {
	t.Helper()
	runtimetest.Eventually(t, 30*time.Second, "every message handled and the keyed stream empty", func() bool {
		got := h.snapshot()
		for _, w := range want {
			if got[w] == 0 {
				return false
			}
		}
		ks, err := env.js.Stream(context.Background(), "JETFN_KEYED_fn")
		return err == nil && ks.CachedInfo().State.Msgs == 0
	})
	wantMap := map[string]int{}
	for _, w := range want {
		wantMap[w] = 1
	}
	if got := h.snapshot(); !maps.Equal(got, wantMap) {
		t.Fatalf("handled %v; want %v: each once", got, wantMap)
	}
}

// deleteKeyedConsumers deletes keyed function f's router consumer on its
// input and every consumer of its keyed stream, as an operator's `nats
// consumer rm` of each would.
func deleteKeyedConsumers(t *testing.T, env *testEnv, f manifest.FunctionSpec) {
	t.Helper()
	ctx := context.Background()
	if err := env.js.DeleteConsumer(ctx, f.Stream, f.RouterDurable()); err != nil {
		t.Fatal(err)
	}
	ks, err := env.js.Stream(ctx, f.KeyedStreamName())
	if err != nil {
		t.Fatal(err)
	}
	names := ks.ConsumerNames(ctx)
	for name := range names.Name() {
		if err := ks.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if names.Err() != nil {
		t.Fatal(names.Err())
	}
}

// publishKeyed publishes data on test.<key> with key in its Order-Id
// header too, so a subject-token and a header key read the same key.
func (e *testEnv) publishKeyed(key, data string) {
	e.t.Helper()
	msg := nats.NewMsg("test." + key)
	msg.Header.Set("Order-Id", key)
	msg.Data = []byte(data)
	if _, err := e.js.PublishMsg(context.Background(), msg); err != nil {
		e.t.Fatal(err)
	}
}
