package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// The tests in this file are issue 29, item 2: a consumer missing when jetfn
// binds a function was created DeliverAll, so every stored message was
// handled again, outside any duplicate window. Each case handles three
// messages, loses the consumer on an operator's path, publishes one more,
// and wants exactly that one handled. Before the fix each saw 7 runs (the
// three again, then the new one).

// handledThree starts rt with rec behind it, handles three messages and
// returns the running runtime.
func (e *testEnv) handledThree(rt *Runtime, rec *recorder) *running {
	e.t.Helper()
	r := e.run(rt)
	for i := range 3 {
		e.publish("test.in", fmt.Sprintf("before-%d", i))
	}
	runtimetest.Eventually(e.t, 10*time.Second, "three handled", func() bool { return rec.count() == 3 })
	runtimetest.Eventually(e.t, 10*time.Second, "three acked", func() bool { return e.settled("TEST", "fn", 3) })
	return r
}

// wantOnlyTheLateOne publishes one message and checks that rec handles it
// and nothing published before it again; also counts messages published
// while the function was away, which must be handled once too.
func (e *testEnv) wantOnlyTheLateOne(rec *recorder, durable string, also ...string) {
	e.t.Helper()
	e.publish("test.in", "late")
	runtimetest.Eventually(e.t, 10*time.Second, "the late message handled", func() bool {
		for _, d := range rec.all() {
			if string(d.msg.Data) == "late" {
				return true
			}
		}
		return false
	})
	want := append([]string{"before-0", "before-1", "before-2"}, also...)
	want = append(want, "late")
	runtimetest.Eventually(e.t, 10*time.Second, "everything acked", func() bool {
		return e.settled("TEST", durable, uint64(len(want)))
	})
	var seen []string
	for _, d := range rec.all() {
		seen = append(seen, string(d.msg.Data))
	}
	if !slices.Equal(seen, want) {
		e.t.Fatalf("handled %v; want %v, each once", seen, want)
	}
}

func recorderFunctions(rec *recorder) []jetfn.Function {
	return []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return rec, nil }}}
}

// TestConsumerDeletedWhileDown: `nats consumer rm` while every instance is
// down. The next start finds no consumer.
func TestConsumerDeletedWhileDown(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	m := testManifest(t, "")
	rt, err := New(env.nc, m, recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.handledThree(rt, rec).stop(t); err != nil {
		t.Fatal(err)
	}
	if err := env.js.DeleteConsumer(context.Background(), "TEST", "fn"); err != nil {
		t.Fatal(err)
	}
	rt, err = New(env.nc, m, recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.wantOnlyTheLateOne(rec, "fn")
}

// TestDurableRenamed: a deploy renames the function's durable.
func TestDurableRenamed(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	rt, err := New(env.nc, testManifest(t, ""), recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.handledThree(rt, rec)
	if err := rt.Apply(context.Background(), testManifest(t, "    durable: fn-v2\n")); err != nil {
		t.Fatal(err)
	}
	env.wantOnlyTheLateOne(rec, "fn-v2")
}

// TestReaddedAfterPrune: a deploy removes the function with --prune (its
// consumer is deleted), a later one adds it back. What was published in
// between is handled; nothing before it again.
func TestReaddedAfterPrune(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	fns := append(recorderFunctions(rec), jetfn.Function{Name: "other", New: func(jetfn.Deps) (jetfn.Handler, error) { return &recorder{}, nil }})
	rt, err := New(env.nc, testManifest(t, ""), fns, WithLogger(testLogger()), WithPrune())
	if err != nil {
		t.Fatal(err)
	}
	env.handledThree(rt, rec)
	none, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: other, version: 1.0.0, stream: TEST, subject: test.other}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Apply(context.Background(), none); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", "while-away")
	if err := rt.Apply(context.Background(), testManifest(t, "")); err != nil {
		t.Fatal(err)
	}
	env.wantOnlyTheLateOne(rec, "fn", "while-away")
}

// TestNewConsumerStart: a consumer jetfn creates with no recorded position
// starts where the manifest's start says, and the log says so with the
// number of stored messages that hands to the function.
func TestNewConsumerStart(t *testing.T) {
	tests := []struct {
		name      string
		start     func(between time.Time) string
		wantRuns  []string
		wantLog   string
		wantLevel string
	}{
		{name: "all (the default)", start: func(time.Time) string { return "" }, wantRuns: []string{"old-1", "old-2", "late"},
			wantLog: "manifest start all: every stored message\" stored_messages_to_handle=2", wantLevel: "WARN"},
		{name: "new", start: func(time.Time) string { return "    start: new\n" }, wantRuns: []string{"late"},
			wantLog: "manifest start new: only messages stored from now on\" stored_messages_to_handle=0", wantLevel: "INFO"},
		{name: "a time", start: func(between time.Time) string { return "    start: " + between.Format(time.RFC3339Nano) + "\n" },
			wantRuns: []string{"old-2", "late"}, wantLog: "stored_messages_to_handle=1", wantLevel: "WARN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			ctx := context.Background()
			if _, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TEST", Subjects: []string{"test.>"}}); err != nil {
				t.Fatal(err)
			}
			env.publish("test.in", "old-1")
			between := storedAt(t, env, 1).Add(time.Millisecond)
			for !time.Now().After(between) {
				runtime.Gosched() // the server's clock is this one: old-2 is stored after `between`
			}
			env.publish("test.in", "old-2")
			rec := &recorder{}
			var logs runtimetest.LogBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			rt, err := New(env.nc, testManifest(t, tt.start(between)), recorderFunctions(rec), WithLogger(log))
			if err != nil {
				t.Fatal(err)
			}
			env.run(rt)
			env.publish("test.in", "late")
			runtimetest.Eventually(t, 10*time.Second, "everything acked", func() bool { return env.settled("TEST", "fn", 3) })
			var runs []string
			for _, d := range rec.all() {
				runs = append(runs, string(d.msg.Data))
			}
			if !slices.Equal(runs, tt.wantRuns) {
				t.Errorf("handled %v, want %v", runs, tt.wantRuns)
			}
			line := logLine(logs.String(), "created the function's consumer")
			if !strings.Contains(line, tt.wantLog) || !strings.Contains(line, "level="+tt.wantLevel) {
				t.Errorf("log line %q, want it to say %q at %s", line, tt.wantLog, tt.wantLevel)
			}
		})
	}
}

// storedAt is when the stream stored message seq.
func storedAt(t *testing.T, env *testEnv, seq uint64) time.Time {
	t.Helper()
	s, err := env.js.Stream(context.Background(), "TEST")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	return m.Time
}

// logLine is the first line of logs holding msg.
func logLine(logs, msg string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, msg) {
			return l
		}
	}
	return ""
}

// TestFunctionRenamed: a deploy renames the function, and with it its
// durable; renamedFrom names the old function, whose position the new
// consumer resumes from.
func TestFunctionRenamed(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	env.renamedAfterThree(rec)
	env.wantOnlyTheLateOne(rec, "fn-renamed")
}

// renamedAfterThree runs fn with rec behind it, has it handle three
// messages, then deploys fn renamed fn-renamed; it returns the runtime.
func (e *testEnv) renamedAfterThree(rec *recorder) *Runtime {
	e.t.Helper()
	rt, err := New(e.nc, testManifest(e.t, ""), renameFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.handledThree(rt, rec)
	if err := rt.Apply(context.Background(), renamedManifest(e.t)); err != nil {
		e.t.Fatal(err)
	}
	return rt
}

// renameFunctions are fn and fn-renamed, both handled by rec.
func renameFunctions(rec *recorder) []jetfn.Function {
	return append(recorderFunctions(rec), jetfn.Function{Name: "fn-renamed", New: func(jetfn.Deps) (jetfn.Handler, error) { return rec, nil }})
}

// renamedManifest is testManifest with fn renamed fn-renamed.
func renamedManifest(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: fn-renamed, renamedFrom: fn, version: 1.0.0, stream: TEST, subject: test.in}
`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFunctionRenamedBack: a deploy renames fn to fn-renamed, a later one
// (a rollback) goes back to fn, which names no renamedFrom: fn-renamed is
// the newer name. fn's consumer still stands where the rename left it.
// What fn-renamed handled must not be handled again. Found by
// test/opscheck (seed 20261209: 25 outputs again, past the window); before
// the fix fn found only its own records and handled "while-renamed" twice.
func TestFunctionRenamedBack(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	rt := env.renamedAfterThree(rec)
	env.publish("test.in", "while-renamed")
	runtimetest.Eventually(t, 10*time.Second, "handled under fn-renamed", func() bool { return env.settled("TEST", "fn-renamed", 4) })
	if err := rt.Apply(context.Background(), testManifest(t, "")); err != nil {
		t.Fatal(err)
	}
	env.wantOnlyTheLateOne(rec, "fn", "while-renamed")
}

// TestFunctionRenamedBackOnARecreatedStream: fn handles three messages, an
// operator deletes the stream, fn-renamed (renamedFrom fn) makes it again
// and handles three more, and a rollback goes back to fn. fn's only
// record of its own is of the deleted stream. What fn-renamed handled on
// the new one must not be handled again. Found by test/opscheck (seed
// 20261208: a renamed remote function rolled back after GREETINGS was
// recreated dead-lettered its messages a second time); before the fix fn
// started from the new stream's first message.
func TestFunctionRenamedBackOnARecreatedStream(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	rt, err := New(env.nc, testManifest(t, ""), renameFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.handledThree(rt, rec).stop(t); err != nil {
		t.Fatal(err)
	}
	if err := env.js.DeleteStream(context.Background(), "TEST"); err != nil {
		t.Fatal(err)
	}
	rt, err = New(env.nc, renamedManifest(t), renameFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	renamed := env.run(rt)
	for i := range 3 {
		env.publish("test.in", fmt.Sprintf("new-%d", i))
	}
	runtimetest.Eventually(t, 10*time.Second, "handled under fn-renamed", func() bool { return env.settled("TEST", "fn-renamed", 3) })
	if err := renamed.stop(t); err != nil {
		t.Fatal(err)
	}
	rt, err = New(env.nc, testManifest(t, ""), renameFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.publish("test.in", "late")
	env.handledExactly(rec, "before-0", "before-1", "before-2", "new-0", "new-1", "new-2", "late")
}

// TestRenamedFunctionKeepsItsScope: a function renamed with renamedFrom
// keeps the name its outputs' and dead letters' IDs are scoped by, so a
// message handled under both names around the rename publishes one output,
// not one per name. Before the fix the renamed function published
// jetfn:fn-renamed:… beside the old jetfn:fn:….
func TestRenamedFunctionKeepsItsScope(t *testing.T) {
	env := newEnv(t)
	var pubs [2]jetfn.Publisher
	fns := []jetfn.Function{
		{Name: "fn", New: func(d jetfn.Deps) (jetfn.Handler, error) { pubs[0] = d.Publisher; return publishOutput(&pubs[0]), nil }},
		{Name: "fn-renamed", New: func(d jetfn.Deps) (jetfn.Handler, error) { pubs[1] = d.Publisher; return publishOutput(&pubs[1]), nil }},
	}
	text := func(name, extra string) *manifest.Manifest {
		m, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: ` + name + extra + `, version: 1.0.0, stream: TEST, subject: test.in, outputs: [{subject: test.out, stream: TEST}]}
`))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	rt, err := New(env.nc, text("fn", ""), fns, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.publish("test.in", "before")
	runtimetest.Eventually(t, 10*time.Second, "before handled", func() bool { return env.settled("TEST", "fn", 1) })
	if err := rt.Apply(context.Background(), text("fn-renamed", ", renamedFrom: fn")); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", "after")
	runtimetest.Eventually(t, 10*time.Second, "after handled", func() bool { return env.settled("TEST", "fn-renamed", 3) })
	for _, m := range runtimetest.StreamMessages(t, env.js, "TEST") {
		if id := m.Header.Get(jetstream.MsgIDHeader); m.Subject == "test.out" && !strings.HasPrefix(id, "jetfn:fn:test.out:") {
			t.Errorf("output %s has ID %q, want it scoped by the function's first name, jetfn:fn:…", m.Data, id)
		}
	}
}

// TestDurableRenamedBack: a deploy renames the durable to fn-v2, a later
// one back to fn, whose consumer (not pruned) still stands where the first
// rename left it. What fn-v2 handled must not be handled again. Found by
// test/opscheck (seed 102: "handled again after the duplicate window");
// before the fix this test saw "while-renamed" handled twice.
func TestDurableRenamedBack(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	rt, err := New(env.nc, testManifest(t, ""), recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.handledThree(rt, rec)
	if err := rt.Apply(context.Background(), testManifest(t, "    durable: fn-v2\n")); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", "while-renamed")
	runtimetest.Eventually(t, 10*time.Second, "handled under fn-v2", func() bool { return env.settled("TEST", "fn-v2", 4) })
	if err := rt.Apply(context.Background(), testManifest(t, "")); err != nil {
		t.Fatal(err)
	}
	env.wantOnlyTheLateOne(rec, "fn", "while-renamed")
}

// TestRenamedFunctionWidenedAfterItsLineageRead: fn reads test.a and
// test.b; fn-renamed (renamedFrom fn) reads test.a only; a rollback to fn
// handles b-2; then fn-renamed comes back reading both. Its consumer never
// read test.b, but its lineage did, through b-2: the backfill of test.b
// starts after that, not at the stream's start. Found by test/opscheck
// (seed 20261211: 84 outputs again); before the fix b-1 and b-2 were
// handled twice.
func TestRenamedFunctionWidenedAfterItsLineageRead(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	both := filterManifest(t, "", "test.a", "test.b")
	rt, err := New(env.nc, both, renameFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.publish("test.a", "a-1")
	env.publish("test.b", "b-1")
	runtimetest.Eventually(t, 10*time.Second, "fn handled a-1 and b-1", func() bool { return env.settled("TEST", "fn", 2) })
	renamed := func(subjects ...string) *manifest.Manifest {
		return readingSubjects(t, renamedManifest(t), subjects...)
	}
	if err := rt.Apply(context.Background(), renamed("test.a")); err != nil {
		t.Fatal(err)
	}
	env.publish("test.a", "a-2")
	runtimetest.Eventually(t, 10*time.Second, "fn-renamed handled a-2", func() bool { return env.settled("TEST", "fn-renamed", 3) })
	if err := rt.Apply(context.Background(), both); err != nil {
		t.Fatal(err)
	}
	env.publish("test.b", "b-2")
	runtimetest.Eventually(t, 10*time.Second, "fn handled b-2", func() bool { return env.settled("TEST", "fn", 4) })
	if err := rt.Apply(context.Background(), renamed("test.a", "test.b")); err != nil {
		t.Fatal(err)
	}
	env.publish("test.b", "late")
	count := map[string]int{}
	runtimetest.Eventually(t, 15*time.Second, "late handled", func() bool {
		clear(count)
		for _, d := range rec.all() {
			count[string(d.msg.Data)]++
		}
		return count["late"] > 0
	})
	// a-2 may run twice: the rollback to fn found fn's consumer behind a
	// detour that read fewer subjects (docs/guarantees.md).
	for _, data := range []string{"a-1", "b-1", "b-2", "late"} {
		if count[data] != 1 {
			t.Errorf("%s handled %d times, want once (all: %v)", data, count[data], count)
		}
	}
}
