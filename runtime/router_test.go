package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// routedManifest has fn reading test.* in order of the payload's "id"
// field, which only the router can read.
func routedManifest(t *testing.T, fnSpec string) *manifest.Manifest {
	t.Helper()
	m := keyedManifest(t, "    ordered: true\n"+fnSpec)
	m.Functions[0].Key = &manifest.KeySpec{Field: "id"}
	return m
}

// publishKeyed publishes {"id": key} to subject with the ID msgID and
// notes its sequence under its key.
func publishKeyed(t *testing.T, env *testEnv, published map[string][]uint64, subject, key, msgID string) {
	t.Helper()
	ack, err := env.js.Publish(context.Background(), subject, []byte(`{"id":"`+key+`"}`), jetstream.WithMsgID(msgID))
	if err != nil {
		t.Fatal(err)
	}
	published[key] = append(published[key], ack.Sequence)
}

// TestRouterCopiesAMessageWithAStatusHeader: a message whose body is
// empty and whose headers happen to include Status looks, to nats.go's
// Fetch, like the server's own status reply. Before the fix the router
// took it for one, never copied nor acknowledged it, and its consumer's
// ack floor stayed behind it for good.
func TestRouterCopiesAMessageWithAStatusHeader(t *testing.T) {
	env := newEnv(t)
	m := keyedManifest(t, "    ordered: true\n    ackWait: 2s\n")
	m.Functions[0].Key = &manifest.KeySpec{Header: "Tenant"}
	rec := &recorder{}
	r := env.start(m, rec)
	msg := nats.NewMsg("test.any")
	msg.Header.Set("Tenant", "a")
	msg.Header.Set("Status", "100")
	if _, err := env.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 20*time.Second, "the message with a Status header handled", func() bool { return rec.count() == 1 })
	runtimetest.Eventually(t, 10*time.Second, "the router's consumer settled", func() bool {
		return r.rt.Stats()[0].RouterPending == 0
	})
}

// TestKeyedInputStreamRecreated: an operator deletes a keyed function's
// input stream. jetfn recreates what the manifest declares for every
// other function; before the fix nobody did it for a keyed one (its
// consumers read the keyed stream), so publishers were refused until an
// administrator stepped in, and a routed function's router retried its
// reset forever.
func TestKeyedInputStreamRecreated(t *testing.T) {
	for name, key := range map[string]*manifest.KeySpec{"token": {Token: 2}, "field": {Field: "id"}} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			m := keyedManifest(t, "    ordered: true\n    ackWait: 2s\n")
			m.Functions[0].Key = key
			h := newKeyOrder(func(jetfn.Msg) bool { return false })
			h.keyOf = fieldKey
			env.start(m, h)
			ctx := context.Background()
			env.publish("test.k", `{"id":"k"}`)
			runtimetest.Eventually(t, 20*time.Second, "the first message handled", func() bool { return h.succeeded() == 1 })
			if err := env.js.DeleteStream(ctx, "TEST"); err != nil {
				t.Fatal(err)
			}
			runtimetest.Eventually(t, consumerCheckEvery+15*time.Second, "the input stream recreated and a message stored", func() bool {
				_, err := env.js.Publish(ctx, "test.k", []byte(`{"id":"k"}`))
				return err == nil
			})
			// A token key's keyed stream sources the input: the server's
			// source retries with a backoff of 10 s and more after the
			// failures it saw while the input was gone.
			runtimetest.Eventually(t, time.Minute, "the message on the recreated stream handled", func() bool { return h.succeeded() == 2 })
		})
	}
}

// TestRewoundRouterCopiesOnlyWhatIsNew: an operator deletes an input
// message the router had copied and moves the router's consumer back over
// the messages before it. It copies them again, the keyed stream drops
// them as duplicates, and what follows is routed once, in order, without
// a refusal. Before the fix the router chained its copies by the last
// message ID: its last copy again was a duplicate whose ID was not the
// keyed stream's last (the deleted message's copy was), so the next copy
// was refused and the router reset (the log said "wrong last msg ID").
func TestRewoundRouterCopiesOnlyWhatIsNew(t *testing.T) {
	env := newEnv(t)
	m := routedManifest(t, "    ackWait: 2s\n")
	h := newKeyOrder(func(jetfn.Msg) bool { return false })
	h.keyOf = fieldKey
	published := map[string][]uint64{}
	r := env.start(m, h)
	for i := range 4 {
		publishKeyed(t, env, published, "test.any", fmt.Sprintf("k%d", i%2), fmt.Sprintf("pub-%d", i))
	}
	runtimetest.Eventually(t, 20*time.Second, "the first messages handled", func() bool { return h.succeeded() == 4 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, err := env.js.Stream(ctx, "TEST")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.DeleteMsg(ctx, published["k1"][1]); err != nil { // the last one copied
		t.Fatal(err)
	}
	if _, err := env.js.ResetConsumerToSequence(ctx, "TEST", m.Functions[0].RouterDurable(), 1); err != nil {
		t.Fatal(err)
	}
	r = env.start(m, h)
	for i := 4; i < 8; i++ {
		publishKeyed(t, env, published, "test.any", fmt.Sprintf("k%d", i%2), fmt.Sprintf("pub-%d", i))
	}
	runtimetest.Eventually(t, 20*time.Second, "the messages after the rewind handled", func() bool { return h.succeeded() >= 8 })
	runtimetest.Eventually(t, 10*time.Second, "the router caught up", func() bool { return r.rt.Stats()[0].RouterPending == 0 })
	h.check(t, env, published, func(string) string { return "test.any" })
	if logs := env.logs.String(); strings.Contains(logs, "copying again") {
		t.Fatalf("the router had a copy refused:\n%s", logs)
	}
}

// TestRoutedFilterNarrowedThenRolledBack is TestFilterNarrowedThenRolledBack
// for a function keyed by a payload field: a deploy drops test.b, its
// rollback adds it back, and what test.b got meanwhile is routed and
// handled after the rollback, once. Before the fix the router's consumer
// moved past it while its filter lacked test.b, and nothing brought it
// back: b-2 was never handled.
func TestRoutedFilterNarrowedThenRolledBack(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	keyed := func(subjects ...string) *manifest.Manifest {
		m := filterManifest(t, "    key: {field: id}\n    ordered: true\n", subjects...)
		if err := m.Validate([]string{"fn"}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	both := keyed("test.in", "test.b")
	rt, err := New(env.nc, both, recorderFunctions(rec), WithLogger(env.logger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	body := func(id string) string { return `{"id":"` + id + `"}` }
	env.publish("test.in", body("in-1"))
	env.publish("test.b", body("b-1"))
	env.handledExactly(rec, body("in-1"), body("b-1"))

	ctx := context.Background()
	if err := rt.Apply(ctx, keyed("test.in")); err != nil {
		t.Fatal(err)
	}
	env.publish("test.b", body("b-2")) // stored while the function does not read test.b
	env.publish("test.in", body("in-2"))
	env.handledExactly(rec, body("in-1"), body("b-1"), body("in-2"))

	if err := rt.Apply(ctx, both); err != nil {
		t.Fatal(err)
	}
	env.publish("test.b", body("b-3"))
	env.handledExactly(rec, body("in-1"), body("b-1"), body("in-2"), body("b-2"), body("b-3"))
}

// TestTokenKeyedFunctionWithTwoSubjects: a function keyed by a subject
// token that reads two subjects. Its keyed stream's source then has two
// subject transforms, and the server separates them in each copy's
// Nats-Stream-Source with a form feed. Before the fix jetfn refused that
// header as unsafe and dead-lettered every message.
func TestTokenKeyedFunctionWithTwoSubjects(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	m := filterManifest(t, "    key: {token: 2}\n    ordered: true\n", "test.*.in", "test.*.b")
	env.start(m, rec)
	env.publish("test.k.in", "in-1")
	env.publish("test.k.b", "b-1")
	env.handledExactly(rec, "in-1", "b-1")
}

// TestInputThatSourcesAnotherStream: a function's input stream sources
// another with two subject transforms, so every message arrives with a
// Nats-Stream-Source holding form feeds. An unkeyed function handles it
// (before the fix it was dead-lettered as unsafe), and so does a function
// keyed by a field: its router moves the header aside on the copy, as the
// keyed stream refuses a published one, and the handler gets it back.
func TestInputThatSourcesAnotherStream(t *testing.T) {
	for name, key := range map[string]string{"unkeyed": "", "routed": "    key: {field: id}\n    ordered: true\n"} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			ctx := context.Background()
			if _, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "UPSTREAM", Subjects: []string{"up.>"}}); err != nil {
				t.Fatal(err)
			}
			_, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TEST", Subjects: []string{"test.>"},
				Sources: []*jetstream.StreamSource{{Name: "UPSTREAM", SubjectTransforms: []jetstream.SubjectTransformConfig{
					{Source: "up.a", Destination: "test.in"}, {Source: "up.b", Destination: "test.other"}}}}})
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			env.start(testManifest(t, key), rec)
			if _, err := env.js.Publish(ctx, "up.a", []byte(`{"id":"k"}`)); err != nil {
				t.Fatal(err)
			}
			env.handledExactly(rec, `{"id":"k"}`)
			if src := rec.all()[0].msg.Header.Get("Nats-Stream-Source"); !strings.HasPrefix(src, "UPSTREAM ") {
				t.Fatalf("handler saw Nats-Stream-Source %q, want the input's, from UPSTREAM", src)
			}
		})
	}
}

// TestRouterTakesOverAfterABackfillEnded: two instances of a routed
// function after a rollback that gave the router a backfill; the one
// routing finishes and removes it, then stops. The other takes over the
// routing and goes on. (A review saw that a router still holding a removed
// backfill would fail to reset it at every takeover; this test did not
// reach that state without the guard in resume, which stays as a
// precaution.)
func TestRouterTakesOverAfterABackfillEnded(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	keyed := func(subjects ...string) *manifest.Manifest {
		return filterManifest(t, "    key: {field: id}\n    ordered: true\n", subjects...)
	}
	both, narrow := keyed("test.in", "test.b"), keyed("test.in")
	var instances []*running
	for range 2 {
		rt, err := New(env.nc, both, recorderFunctions(rec), WithLogger(env.logger()))
		if err != nil {
			t.Fatal(err)
		}
		instances = append(instances, env.run(rt))
	}
	body := func(id string) string { return `{"id":"` + id + `"}` }
	env.publish("test.in", body("in-1"))
	env.handledExactly(rec, body("in-1"))
	ctx := context.Background()
	apply := func(m *manifest.Manifest) {
		for _, r := range instances {
			if err := r.rt.Apply(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(narrow)
	env.publish("test.b", body("b-1")) // passed over by the narrow revision
	apply(both)
	env.handledExactly(rec, body("in-1"), body("b-1"))
	routerDurable := both.Functions[0].RouterDurable()
	runtimetest.Eventually(t, 20*time.Second, "the router's backfill removed", func() bool {
		c, err := env.js.Consumer(ctx, "TEST", routerDurable)
		return err == nil && c.CachedInfo().Config.Metadata[backfillKey] == ""
	})
	routing := slices.IndexFunc(instances, func(r *running) bool { return r.rt.leaseOf("router.fn", both, testLogger()).holds() })
	if routing < 0 {
		t.Fatal("no instance holds the router's lease")
	}
	if err := instances[routing].stop(t); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", body("in-2"))
	env.handledExactly(rec, body("in-1"), body("b-1"), body("in-2"))
}

// TestStandbyRouterTakesUpARecreatedInput: the input stream is deleted and
// the routing instance makes it again; then the routing passes to an
// instance that was standing by, whose handle of the router's consumer had
// not looked since. It must copy the new incarnation's messages under
// their own identity. Before the fix it named them by the old one, whose
// sequences the new stream reuses, so the keyed stream dropped them as
// duplicates of the old messages' copies and they were never handled
// (opscheck seed 20261207: skipped, then handled out of order when a later
// deletion of the router's consumer copied them again).
func TestStandbyRouterTakesUpARecreatedInput(t *testing.T) {
	env := newEnv(t)
	m := routedManifest(t, "    ackWait: 2s\n")
	h := newKeyOrder(func(jetfn.Msg) bool { return false })
	h.keyOf = fieldKey
	instances := []*running{env.start(m, h), env.start(m, h)}
	published := map[string][]uint64{}
	for i := range 3 {
		publishKeyed(t, env, published, "test.any", fmt.Sprintf("k%d", i), fmt.Sprintf("old-%d", i))
	}
	runtimetest.Eventually(t, 20*time.Second, "the old incarnation's messages handled", func() bool { return h.succeeded() == 3 })
	routing := slices.IndexFunc(instances, func(r *running) bool { return r.rt.leaseOf("router.fn", m, testLogger()).holds() })
	if routing < 0 {
		t.Fatal("no instance holds the router's lease")
	}
	ctx := context.Background()
	if err := env.js.DeleteStream(ctx, "TEST"); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 30*time.Second, "the router's consumer made again on a new input stream", func() bool {
		_, err := env.js.Consumer(ctx, "TEST", m.Functions[0].RouterDurable())
		return err == nil
	})
	if err := instances[routing].stop(t); err != nil { // the standby takes over the routing
		t.Fatal(err)
	}
	for i := range 3 {
		publishKeyed(t, env, published, "test.any", fmt.Sprintf("k%d", i), fmt.Sprintf("new-%d", i))
	}
	runtimetest.Eventually(t, 30*time.Second, "the new incarnation's messages handled", func() bool { return h.succeeded() == 6 })
}
