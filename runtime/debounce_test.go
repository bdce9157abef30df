package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/partition"
	"github.com/jetfn/jetfn/manifest"
	jetfnpause "github.com/jetfn/jetfn/ops/pause"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// debouncedManifest has fn reading test.* debounced by period, keyed by
// subject token 2.
func debouncedManifest(t *testing.T, period string) *manifest.Manifest {
	t.Helper()
	return subjectManifest(t, "test.*", "    key: {token: 2}\n    debounce: "+period+"\n    ackWait: 2s\n")
}

// publishBurst publishes n messages on test.<key>, {"i": 0} to {"i": n-1},
// each with a message ID of its own, <key>-<i>, or <key>-<i>-<burst> for a
// later burst.
func publishBurst(t *testing.T, env *testEnv, key string, n int, burst ...int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("%s-%d", key, i)
		if len(burst) > 0 {
			id += fmt.Sprintf("-%d", burst[0])
		}
		msg := nats.NewMsg("test." + key)
		msg.Data = fmt.Appendf(nil, `{"i":%d}`, i)
		msg.Header.Set("Burst", key)
		if _, err := env.js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDebounceRunsOnceWithTheLast: a burst of one key's messages runs the
// handler once, with the last of them as published (subject, headers,
// payload, the publisher's message ID), once the key has been quiet for
// the period; each key on its own; and a later burst of a key runs again.
func TestDebounceRunsOnceWithTheLast(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	env.start(debouncedManifest(t, "1s"), rec)
	publishBurst(t, env, "a", 5)
	publishBurst(t, env, "b", 3)
	runtimetest.Eventually(t, 20*time.Second, "a run per key", func() bool { return rec.count() >= 2 })
	got := map[string]string{}
	for _, r := range rec.all() {
		got[r.msg.Subject] = string(r.msg.Data)
		if r.msg.Header.Get("Burst") == "" || r.msg.Header.Get(jetstream.MsgIDHeader) == "" {
			t.Errorf("run of %s lost its headers: %v", r.msg.Subject, r.msg.Header)
		}
		if r.msg.Stream != "TEST" {
			t.Errorf("run of %s is from stream %s, want the input TEST", r.msg.Subject, r.msg.Stream)
		}
		for k := range r.msg.Header {
			if strings.HasPrefix(k, "Nats-Batch-") || strings.HasPrefix(k, "Nats-Schedule") {
				t.Errorf("run of %s shows the debounce stream's header %s: %v", r.msg.Subject, k, r.msg.Header)
			}
		}
	}
	if got["test.a"] != `{"i":4}` || got["test.b"] != `{"i":2}` {
		t.Errorf("runs %v, want test.a with the last of 5 and test.b with the last of 3", got)
	}
	publishBurst(t, env, "a", 2, 2)
	runtimetest.Eventually(t, 20*time.Second, "the second burst's run", func() bool { return rec.count() >= 3 })
	if last := rec.all()[2]; last.msg.Subject != "test.a" || last.msg.Header.Get(jetstream.MsgIDHeader) != "a-1-2" {
		t.Errorf("third run %s %v, want test.a with message a-1-2", last.msg.Subject, last.msg.Header)
	}
	assertRunsStay(t, env, rec, 3)
}

// assertRunsStay waits until the debounce stream holds no schedule and no
// due run and the debouncer has nothing pending, then checks that the
// handler ran exactly want times.
func assertRunsStay(t *testing.T, env *testEnv, rec *recorder, want int) {
	t.Helper()
	ctx := context.Background()
	runtimetest.Eventually(t, 20*time.Second, "nothing left to debounce or run", func() bool {
		if waiting, ok := schedulesOrRunsStored(env); !ok || waiting {
			return false
		}
		c, err := env.js.Consumer(ctx, "TEST", "fn-debouncer")
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	})
	if got := rec.count(); got != want {
		t.Errorf("%d runs, want %d", got, want)
	}
}

// awaitWaitingSchedule waits until the debouncer has turned an input into
// a stored schedule or run, so a check that depends on one does not race
// the debouncer.
func awaitWaitingSchedule(t *testing.T, env *testEnv) {
	t.Helper()
	runtimetest.Eventually(t, 20*time.Second, "a schedule or run stored", func() bool {
		waiting, ok := schedulesOrRunsStored(env)
		return ok && waiting
	})
}

// schedulesOrRunsStored says whether fn's debounce stream holds anything
// but receipts; ok is false when the stream could not be read.
func schedulesOrRunsStored(env *testEnv) (waiting, ok bool) {
	ctx := context.Background()
	ds, err := env.js.Stream(ctx, manifest.DebounceStreamPrefix+"fn")
	if err != nil {
		return false, false
	}
	info, err := ds.Info(ctx, jetstream.WithSubjectFilter("jetfn.debounce.fn.>"))
	if err != nil {
		return false, false
	}
	for subject := range info.State.Subjects {
		if !isReceipt(subject) {
			return true, true
		}
	}
	return false, true
}

func isReceipt(subject string) bool { return strings.HasPrefix(subject, "jetfn.debounce.fn.seen.") }

// TestDebounceRedeliveredInputRunsNothing: the debouncer's consumer is
// moved back to the first message after the burst ran (as a redelivery
// after a crash before the ack would bring them again); every input's
// receipt makes its batch a duplicate, so nothing is scheduled or run
// again.
func TestDebounceRedeliveredInputRunsNothing(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	env.start(debouncedManifest(t, "1s"), rec)
	publishBurst(t, env, "a", 4)
	runtimetest.Eventually(t, 20*time.Second, "the burst's run", func() bool { return rec.count() >= 1 })
	if _, err := env.js.ResetConsumerToSequence(context.Background(), "TEST", "fn-debouncer", 1); err != nil {
		t.Fatal(err)
	}
	assertRunsStay(t, env, rec, 1)
}

// TestDebounceKeylessMessageDeadLettered: a message without its key is
// dead-lettered once, with the reason, and holds up no other.
func TestDebounceKeylessMessageDeadLettered(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	m := subjectManifest(t, "test.*", "    key: {header: Tenant}\n    debounce: 1s\n    ackWait: 2s\n")
	env.start(m, rec)
	env.publish("test.x", `{}`) // no Tenant
	msg := nats.NewMsg("test.y")
	msg.Header.Set("Tenant", "t1")
	if _, err := env.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 20*time.Second, "the keyed message's run", func() bool { return rec.count() == 1 })
	letters := env.deadLetters(1)
	if reason := letters[0].Header.Get("Jetfn-Error"); reason == "" {
		t.Errorf("dead letter without a reason: %v", letters[0].Header)
	}
}

// TestDebounceSchedulesAgainWhatTheServerPurged: the server purges a key's
// wait subject when a schedule fires; a newer message's schedule stored in
// that instant goes with it. The runner of the fired run finds the key's
// newer receipt without a schedule and schedules it again. The test makes
// that state by hand: a long period, two messages of one key (two
// receipts, the second's schedule waiting), the schedule purged, and the
// first message's run stored as the server would fire it.
func TestDebounceSchedulesAgainWhatTheServerPurged(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	env.start(debouncedManifest(t, "1h"), rec)
	ctx := context.Background()
	publishBurst(t, env, "a", 2)
	ds, err := env.js.Stream(ctx, manifest.DebounceStreamPrefix+"fn")
	if err != nil {
		t.Fatal(err)
	}
	f := manifestFunction(t, debouncedManifest(t, "1h"))
	h := keyHash("a")
	wait := f.DebounceSubject(manifest.DebounceWait, h)
	var first *jetstream.RawStreamMsg
	runtimetest.Eventually(t, 20*time.Second, "both receipts and the second's schedule", func() bool {
		info, err := ds.Info(ctx, jetstream.WithSubjectFilter("jetfn.debounce.fn.>"))
		if err != nil || info.State.Subjects[f.DebounceSubject(manifest.DebounceSeen, h)] != 2 || info.State.Subjects[wait] != 1 {
			return false
		}
		first, err = ds.GetMsg(ctx, info.State.FirstSeq)
		return err == nil
	})
	if err := ds.Purge(ctx, jetstream.WithPurgeSubject(wait)); err != nil {
		t.Fatal(err)
	}
	fired := nats.NewMsg(f.DebounceRunSubject(partition.Of([]byte("a"), f.Partitions), h))
	fired.Data = first.Data
	for k, vs := range first.Header {
		if !strings.HasPrefix(k, "Nats-") { // the receipt's ID, TTL and batch
			fired.Header[k] = vs
		}
	}
	if _, err := env.js.PublishMsg(ctx, fired); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 20*time.Second, "the first message's run", func() bool { return rec.count() == 1 })
	if got := string(rec.all()[0].msg.Data); got != `{"i":0}` {
		t.Errorf("ran %s, want the first message", got)
	}
	runtimetest.Eventually(t, 20*time.Second, "the second message scheduled again", func() bool {
		m, err := ds.GetLastMsgForSubject(ctx, wait)
		return err == nil && string(m.Data) == `{"i":1}`
	})
}

// TestDebounceRunsEachBurstOnceAfterAPause: while the function is paused,
// a key's burst comes due, then a newer burst of the key comes due too.
// Resumed, the older run must not schedule the newer message again: it
// has its own run, and would run twice.
func TestDebounceRunsEachBurstOnceAfterAPause(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	env.start(debouncedManifest(t, "1s"), rec)
	ctx := context.Background()
	if _, err := jetfnpause.Pause(ctx, env.js, "fn", jetfnpause.Indefinitely(time.Now())); err != nil {
		t.Fatal(err)
	}
	publishBurst(t, env, "a", 1)
	waitDueRuns(t, env, 1)
	publishBurst(t, env, "a", 1, 2)
	waitDueRuns(t, env, 2)
	if _, err := jetfnpause.Resume(ctx, env.js, "fn"); err != nil {
		t.Fatal(err)
	}
	assertRunsStay(t, env, rec, 2)
}

// waitDueRuns waits until fn's debounce stream holds n due runs.
func waitDueRuns(t *testing.T, env *testEnv, n uint64) {
	t.Helper()
	runtimetest.Eventually(t, 20*time.Second, fmt.Sprintf("%d due runs", n), func() bool {
		ds, err := env.js.Stream(context.Background(), manifest.DebounceStreamPrefix+"fn")
		if err != nil {
			return false
		}
		info, err := ds.Info(context.Background(), jetstream.WithSubjectFilter("jetfn.debounce.fn.run.>"))
		if err != nil {
			return false
		}
		var due uint64
		for _, c := range info.State.Subjects {
			due += c
		}
		return due == n
	})
}

// TestDebounceRunsOfAKeyInOrder: a key's run fails and waits for its
// retry while the key's next burst comes due; the next burst's run waits
// for the first to succeed, as a key's runs are handled one at a time, in
// the order they came due, across every instance.
func TestDebounceRunsOfAKeyInOrder(t *testing.T) {
	env := newEnv(t)
	var mu sync.Mutex
	var succeeded []string
	failed := false
	h := jetfn.HandlerFunc(func(_ context.Context, msg jetfn.Msg) error {
		mu.Lock()
		defer mu.Unlock()
		id := msg.Header.Get(jetstream.MsgIDHeader)
		if id == "a-0" && !failed {
			failed = true
			return errors.New("not yet")
		}
		succeeded = append(succeeded, id)
		return nil
	})
	env.start(subjectManifest(t, "test.*", "    key: {token: 2}\n    debounce: 1s\n    ackWait: 10s\n    backoff: [3s]\n    concurrency: 4\n"), h)
	locked := func(f func() bool) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return f() }
	}
	publishBurst(t, env, "a", 1)
	runtimetest.Eventually(t, 20*time.Second, "the first run failed", locked(func() bool { return failed }))
	publishBurst(t, env, "a", 1, 2)
	runtimetest.Eventually(t, 20*time.Second, "both runs succeeded", locked(func() bool { return len(succeeded) == 2 }))
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(succeeded, []string{"a-0", "a-0-2"}) {
		t.Errorf("runs succeeded in the order %v, want a-0 then a-0-2", succeeded)
	}
}

// TestDebounceDeadLettersWhatCannotBeStored: a message whose receipt the
// server can never store (the input at the connection's max payload,
// which the receipt's headers push over) is dead-lettered with the
// reason, and the next message, of another key, still runs.
func TestDebounceDeadLettersWhatCannotBeStored(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	env.start(debouncedManifest(t, "1s"), rec)
	big := nats.NewMsg("test.big")
	big.Data = bytes.Repeat([]byte("x"), int(env.nc.MaxPayload())-64)
	if _, err := env.js.PublishMsg(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	publishBurst(t, env, "b", 1)
	runtimetest.Eventually(t, 20*time.Second, "the next key's run", func() bool { return rec.count() == 1 })
	letter := env.deadLetters(1)[0]
	if reason := letter.Header.Get("Jetfn-Error"); !strings.Contains(reason, "payload") {
		t.Errorf("dead letter's reason %q does not say the payload is too large", reason)
	}
}

// manifestFunction is m's one function.
func manifestFunction(t *testing.T, m *manifest.Manifest) manifest.FunctionSpec {
	t.Helper()
	f, ok := m.Function("fn")
	if !ok {
		t.Fatal("no function fn")
	}
	return f
}

// TestDebounceRepartitionRefusedWhileRunsWait: a schedule waiting names
// its key's partition; a deploy that changes the partitions then is
// refused, by check --server and by the runtime. Once nothing waits, it
// is applied, and the partitions no longer in use are removed.
func TestDebounceRepartitionRefusedWhileRunsWait(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	r := env.start(debouncedManifest(t, "5s"), rec)
	publishBurst(t, env, "a", 1)
	awaitWaitingSchedule(t, env)
	more := subjectManifest(t, "test.*", "    key: {token: 2}\n    debounce: 5s\n    ackWait: 2s\n    partitions: 4\n")
	refusals, err := ServerRefusals(context.Background(), env.js, more)
	if err != nil || len(refusals) != 1 || !strings.Contains(refusals[0], "partitions") {
		t.Fatalf("check --server said %q, %v; want the repartition refused", refusals, err)
	}
	if err := r.rt.Apply(context.Background(), more); !errors.Is(err, ErrServerRefused) {
		t.Fatalf("Apply = %v, want ErrServerRefused", err)
	}
	assertRunsStay(t, env, rec, 1)
	if err := r.rt.Apply(context.Background(), more); err != nil {
		t.Fatalf("Apply once nothing waits = %v", err)
	}
	fewer := subjectManifest(t, "test.*", "    key: {token: 2}\n    debounce: 2s\n    ackWait: 2s\n    partitions: 2\n")
	if err := r.rt.Apply(context.Background(), fewer); err != nil {
		t.Fatalf("Apply of fewer partitions = %v", err)
	}
	ds, err := env.js.Stream(context.Background(), manifest.DebounceStreamPrefix+"fn")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range ds.ConsumerNames(context.Background()).Name() {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"fn-p000", "fn-p001"}) {
		t.Errorf("debounce stream's consumers %v, want the two partitions' only", names)
	}
}

// TestDebounceToggleRefusedWhileTheOtherConsumerExists: turning debounce
// on while the function's own consumer exists would debounce its input
// again from the manifest's start (every message run again), and turning
// it off while the debouncer's consumer exists would do the same with the
// function's new consumer: both are refused, naming the consumer to
// remove.
func TestDebounceToggleRefusedWhileTheOtherConsumerExists(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	plain := subjectManifest(t, "test.*", "    ackWait: 2s\n")
	r := env.start(plain, rec)
	env.publish("test.a", `{}`)
	runtimetest.Eventually(t, 20*time.Second, "the plain run", func() bool { return rec.count() == 1 })
	debounced := debouncedManifest(t, "1s")
	if err := r.rt.Apply(context.Background(), debounced); !errors.Is(err, ErrServerRefused) || !strings.Contains(err.Error(), "consumer fn on TEST") {
		t.Fatalf("turning debounce on: Apply = %v, want ErrServerRefused naming consumer fn on TEST", err)
	}
	refusals, err := ServerRefusals(context.Background(), env.js, debounced)
	if err != nil || len(refusals) != 1 || !strings.Contains(refusals[0], "consumer fn on TEST") {
		t.Fatalf("check --server said %q, %v; want debounce turned on refused", refusals, err)
	}

	env2 := newEnv(t)
	rec2 := &recorder{}
	r2 := env2.start(debouncedManifest(t, "1s"), rec2)
	if err := r2.rt.Apply(context.Background(), plain); !errors.Is(err, ErrServerRefused) || !strings.Contains(err.Error(), "consumer fn-debouncer on TEST") {
		t.Fatalf("turning debounce off: Apply = %v, want ErrServerRefused naming consumer fn-debouncer on TEST", err)
	}
}

// TestDebounceWithoutProvisioningChecksWhatOrderNeeds: an instance that
// provisions nothing refuses to start on a debouncer consumer or a run
// partition consumer that hands out more than one message at a time (a
// key's messages would be debounced, or its runs handled, out of order),
// or a debounce stream without the settings debouncing needs, naming
// the setting.
func TestDebounceWithoutProvisioningChecksWhatOrderNeeds(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, want string
		change     func(*testing.T, jetstream.JetStream)
	}{
		{"debouncer consumer", "max_ack_pending 5", func(t *testing.T, js jetstream.JetStream) {
			editConsumer(t, js, "TEST", "fn-debouncer", func(c *jetstream.ConsumerConfig) { c.MaxAckPending = 5 })
		}},
		{"run partition consumer", "max_ack_pending 5", func(t *testing.T, js jetstream.JetStream) {
			editConsumer(t, js, manifest.DebounceStreamPrefix+"fn", "fn-p000", func(c *jetstream.ConsumerConfig) { c.MaxAckPending = 5 })
		}},
		{"debounce stream", "per-message TTL", func(t *testing.T, js jetstream.JetStream) {
			s, err := js.Stream(ctx, manifest.DebounceStreamPrefix+"fn")
			if err != nil {
				t.Fatal(err)
			}
			cfg := s.CachedInfo().Config
			cfg.AllowMsgTTL = false
			if _, err := js.UpdateStream(ctx, cfg); err == nil {
				return
			}
			// The server keeps per-message TTLs once on: make the stream anew without.
			if err := js.DeleteStream(ctx, cfg.Name); err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			m := debouncedManifest(t, "1s")
			first := env.start(m, &recorder{})
			first.cancel()
			<-first.done
			c.change(t, env.js)
			rt, err := New(env.nc, m, []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return &recorder{}, nil }}},
				WithLogger(env.logger()), WithoutProvisioning())
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := rt.Run(runCtx); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %v, want a refusal naming %q", err, c.want)
			}
		})
	}
}

// editConsumer changes a consumer's config on the server.
func editConsumer(t *testing.T, js jetstream.JetStream, stream, name string, edit func(*jetstream.ConsumerConfig)) {
	t.Helper()
	c, err := js.Consumer(context.Background(), stream, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	edit(&cfg)
	if _, err := js.UpdateConsumer(context.Background(), stream, cfg); err != nil {
		t.Fatal(err)
	}
}

// TestDebounceWidenedSubjectHandsOverWhatWasStored: a deploy widens a
// debounced function's subject; what the added subject stored before the
// change is debounced and run (the debouncer binds the backfill its
// consumer's filter change made), as for any function.
func TestDebounceWidenedSubjectHandsOverWhatWasStored(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	spec := "    key: {token: 3}\n    debounce: 1s\n    ackWait: 2s\n"
	r := env.start(subjectManifest(t, "test.a.*", spec), rec)
	env.publish("test.b.j", `{"before":true}`)
	env.publish("test.a.k", `{}`)
	runtimetest.Eventually(t, 20*time.Second, "test.a.k's run", func() bool { return rec.count() == 1 })
	if err := r.rt.Apply(context.Background(), subjectManifest(t, "test.*.*", spec)); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 20*time.Second, "test.b.j's run, stored before the change", func() bool { return rec.count() == 2 })
	if got := rec.all()[1].msg.Subject; got != "test.b.j" {
		t.Errorf("second run on %s, want test.b.j", got)
	}
	assertRunsStay(t, env, rec, 2)
}

// TestDebouncePlanStartNamesTheDebouncer: check --server's start plan of a
// debounced function is its debouncer consumer's, the one that reads the
// input: missing, with the stored messages it would debounce; then, once
// running, where it is.
func TestDebouncePlanStartNamesTheDebouncer(t *testing.T) {
	env := newEnv(t)
	m := debouncedManifest(t, "1s")
	provision(t, env.js, subjectManifest(t, "test.*", "    ackWait: 2s\n"))
	if err := env.js.DeleteConsumer(context.Background(), "TEST", "fn"); err != nil {
		t.Fatal(err)
	}
	publishBurst(t, env, "a", 3)
	plans, err := PlanStarts(context.Background(), env.js, m)
	if err != nil || len(plans) != 1 || plans[0].Consumer != "fn-debouncer" || plans[0].Exists || plans[0].Pending != 3 {
		t.Fatalf("PlanStarts = %+v, %v; want fn-debouncer missing with 3 messages to handle", plans, err)
	}
	rec := &recorder{}
	env.start(m, rec)
	assertRunsStay(t, env, rec, 1)
	plans, err = PlanStarts(context.Background(), env.js, m)
	if err != nil || len(plans) != 1 || plans[0].Consumer != "fn-debouncer" || !plans[0].Exists || plans[0].Delivered != 3 {
		t.Fatalf("PlanStarts = %+v, %v; want fn-debouncer delivered up to 3", plans, err)
	}
}
