package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// The tests in this file are issue 29, item 5: changing a function's
// subject filter moved nothing back, so narrowing then rolling back lost
// what was published in between, and adding a subject skipped its stored
// backlog. Before the fix, b2 in the first test and b1, b2 in the second
// were never handled.

// handledExactly waits until rec has handled want (in any order), then
// checks it handled nothing else and nothing twice.
func (e *testEnv) handledExactly(rec *recorder, want ...string) {
	e.t.Helper()
	slices.Sort(want)
	var got []string
	defer func() {
		if e.t.Failed() {
			e.t.Logf("handled: %v", got)
		}
	}()
	runtimetest.Eventually(e.t, 15*time.Second, "handled "+joinStrings(want), func() bool {
		got = got[:0]
		for _, d := range rec.all() {
			got = append(got, string(d.msg.Data))
		}
		slices.Sort(got)
		return len(got) >= len(want)
	})
	if !slices.Equal(got, want) {
		e.t.Fatalf("handled %v, want %v, each once", got, want)
	}
}

// filterManifest is testManifest's, reading subjects instead of test.in.
func filterManifest(t *testing.T, extra string, subjects ...string) *manifest.Manifest {
	t.Helper()
	return readingSubjects(t, testManifest(t, extra), subjects...)
}

// readingSubjects has m's only function read subjects instead of its one
// subject, and revalidates m.
func readingSubjects(t *testing.T, m *manifest.Manifest, subjects ...string) *manifest.Manifest {
	t.Helper()
	m.Functions[0].Subject, m.Functions[0].Subjects = "", subjects
	if err := m.Validate([]string{m.Functions[0].Name}); err != nil {
		t.Fatal(err)
	}
	return m
}

func joinStrings(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// narrowed runs fn on test.in and test.b, has it handle in-1 and b-1,
// deploys a revision without test.b and stores b-2 there. It returns the
// runtime, its recorder and the wide manifest, for a rollback.
func (e *testEnv) narrowed() (*running, *recorder, *manifest.Manifest) {
	e.t.Helper()
	rec := &recorder{}
	both := filterManifest(e.t, "", "test.in", "test.b")
	rt, err := New(e.nc, both, recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		e.t.Fatal(err)
	}
	r := e.run(rt)
	e.publish("test.in", "in-1")
	e.publish("test.b", "b-1")
	e.handledExactly(rec, "in-1", "b-1")
	if err := rt.Apply(context.Background(), testManifest(e.t, "")); err != nil {
		e.t.Fatal(err)
	}
	e.publish("test.b", "b-2") // stored while the function does not read test.b
	return r, rec, both
}

// TestFilterNarrowedThenRolledBack: a deploy drops test.b, its rollback
// adds it back. What test.b got meanwhile is handled after the rollback,
// and nothing handled before is handled again.
func TestFilterNarrowedThenRolledBack(t *testing.T) {
	env := newEnv(t)
	r, rec, both := env.narrowed()
	ctx := context.Background()
	env.publish("test.in", "in-2")
	env.handledExactly(rec, "in-1", "b-1", "in-2")

	if err := r.rt.Apply(ctx, both); err != nil {
		t.Fatal(err)
	}
	env.publish("test.b", "b-3")
	env.handledExactly(rec, "in-1", "b-1", "in-2", "b-2", "b-3")
}

// TestFilterSubjectAdded: a deploy adds test.b, which already holds
// messages. The function's start says whether its stored backlog is
// handled: all (the default) handles it once, new skips it on purpose.
func TestFilterSubjectAdded(t *testing.T) {
	tests := []struct {
		name  string
		start string
		want  []string
	}{
		{name: "start all", want: []string{"in-1", "b-1", "b-2", "b-3"}},
		{name: "start new", start: "    start: new\n", want: []string{"in-1", "b-3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			rec := &recorder{}
			rt, err := New(env.nc, testManifest(t, tt.start), recorderFunctions(rec), WithLogger(testLogger()))
			if err != nil {
				t.Fatal(err)
			}
			env.run(rt)
			// b-2 before in-1: once in-1 is handled the consumer has passed
			// b-2 for certain. Published after it, b-2 was sometimes still
			// ahead of the server's scan when the filter widened, and then
			// "start: new" rightly delivered it (1 fresh run in 6).
			env.publish("test.b", "b-1")
			env.publish("test.b", "b-2")
			env.publish("test.in", "in-1")
			env.handledExactly(rec, "in-1")
			if err := rt.Apply(context.Background(), filterManifest(t, tt.start, "test.in", "test.b")); err != nil {
				t.Fatal(err)
			}
			env.publish("test.b", "b-3")
			env.handledExactly(rec, tt.want...)
		})
	}
}

// TestFilterChangedWhileBackfillRuns: a second change comes while the
// backfill of the first still has messages to hand over; the next
// backfill takes them over, and nothing is lost. What the first had
// handed over above its ack floor (b-2, acked while b-1 was held) may
// come again, as any redelivery may: once more at most.
func TestFilterChangedWhileBackfillRuns(t *testing.T) {
	env := newEnv(t)
	release := make(chan struct{})
	done := &recorder{}
	h := jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
		if string(msg.Data) == "b-1" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err() // returned by the drain: not done
			}
		}
		return done.Handle(ctx, msg)
	})
	fns := []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return h, nil }}}
	const two = "    concurrency: 2\n" // b-2 runs beside the held b-1
	rt, err := New(env.nc, testManifest(t, two), fns, WithLogger(testLogger()), WithDrainTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.publish("test.b", "b-1")
	env.publish("test.b", "b-2")
	env.publish("test.in", "in-1")
	env.handledExactly(done, "in-1")
	ctx := context.Background()
	if err := rt.Apply(ctx, filterManifest(t, two, "test.in", "test.b")); err != nil {
		t.Fatal(err)
	}
	env.handledExactly(done, "in-1", "b-2") // b-1 is held in its handler
	if err := rt.Apply(ctx, filterManifest(t, two, "test.b", "test.c")); err != nil {
		t.Fatal(err)
	}
	close(release)
	env.publish("test.c", "c-1")
	env.publish("test.in", "in-2") // no longer read
	env.handledEach(done, "in-1", "b-2", "b-1", "c-1")
}

// handledEach waits until rec has handled every one of want, then checks
// it handled nothing else, and nothing more than twice.
func (e *testEnv) handledEach(rec *recorder, want ...string) {
	e.t.Helper()
	count := map[string]int{}
	runtimetest.Eventually(e.t, 15*time.Second, "handled "+joinStrings(want), func() bool {
		clear(count)
		for _, d := range rec.all() {
			count[string(d.msg.Data)]++
		}
		return !slices.ContainsFunc(want, func(w string) bool { return count[w] == 0 })
	})
	for data, n := range count {
		if !slices.Contains(want, data) || n > 2 {
			e.t.Errorf("%s handled %d times; want each of %v once (twice at most for one in flight at a change)", data, n, want)
		}
	}
}

// TestFilterNotesSurviveAConsumerDeletion: a deploy drops test.b, an
// operator deletes the consumer, jetfn makes it again, and a rollback adds
// test.b back. What test.b got while it was dropped is handled, and what
// was handled before the drop is not handled again. Before the fix the
// consumer made again had lost the note of how far test.b had been
// handled, so the rollback's backfill handed over test.b from its first
// message (opscheck seed 20261207: a narrowed and renamed remote function,
// its consumer deleted, then rolled back, published 37 outputs again).
func TestFilterNotesSurviveAConsumerDeletion(t *testing.T) {
	env := newEnv(t)
	r, rec, both := env.narrowed()
	ctx := context.Background()
	if err := env.js.DeleteConsumer(ctx, "TEST", "fn"); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", "in-2")
	env.handledExactly(rec, "in-1", "b-1", "in-2") // on the consumer made again

	if err := r.rt.Apply(ctx, both); err != nil {
		t.Fatal(err)
	}
	env.publish("test.b", "b-3")
	env.handledExactly(rec, "in-1", "b-1", "in-2", "b-2", "b-3")
}

// TestDurableRenamedAndWidened: one deploy renames the durable and adds a
// subject (opscheck seed 20261217 on a 3-node cluster: 40 messages lost).
// The new durable resumes after the old one's floor, which read only
// test.in; what test.b already stored is handed over as any added
// subject's is, once. Before, it started after that floor on every
// subject, and b-1 was never handled.
func TestDurableRenamedAndWidened(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	rt, err := New(env.nc, testManifest(t, ""), recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.handledThree(rt, rec)
	env.publish("test.b", "b-1") // below the floor fn-v2 resumes after
	env.publish("test.in", "in-4")
	runtimetest.Eventually(t, 10*time.Second, "in-4 acknowledged", func() bool { return env.settled("TEST", "fn", 5) })
	widened := filterManifest(t, "    durable: fn-v2\n", "test.in", "test.b")
	plans, err := PlanStarts(context.Background(), env.js, widened)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || !strings.Contains(plans[0].Start, "handed over") {
		t.Fatalf("jetfn check --server would say %+v; want the hand-over of test.b said", plans)
	}
	if err := rt.Apply(context.Background(), widened); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", "late")
	env.handledExactly(rec, "before-0", "before-1", "before-2", "in-4", "b-1", "late")
}

// TestDurableRenamedAfterANarrowing: a deploy drops test.b, a later one
// renames the durable and reads test.b again, with the old consumer still
// there or deleted while the function was down. The new consumer keeps
// the old one's note of how far test.b was handled, so only what test.b
// got meanwhile is handed over. Before the notes went with the records,
// a consumer created from a record handed test.b over from its first
// message (opscheck seed 20261217: 30 outputs twice).
func TestDurableRenamedAfterANarrowing(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		t.Run(fmt.Sprintf("old consumer deleted=%v", deleted), func(t *testing.T) {
			env := newEnv(t)
			r, rec, _ := env.narrowed()
			env.publish("test.in", "in-2")
			env.handledExactly(rec, "in-1", "b-1", "in-2")
			renamed := filterManifest(t, "    durable: fn-v2\n", "test.in", "test.b")
			if deleted {
				if err := r.stop(t); err != nil {
					t.Fatal(err)
				}
				if err := env.js.DeleteConsumer(context.Background(), "TEST", "fn"); err != nil {
					t.Fatal(err)
				}
				env.start(renamed, rec)
			} else if err := r.rt.Apply(context.Background(), renamed); err != nil {
				t.Fatal(err)
			}
			env.publish("test.in", "late")
			env.handledExactly(rec, "in-1", "b-1", "in-2", "b-2", "late")
		})
	}
}

// TestDurableRenamedWhileNarrowing: one deploy renames the durable and
// drops test.b, a later one reads test.b again. The new durable notes that
// test.b was handled through the old one's floor, as a narrowing of one
// consumer does, so the widening hands over only what test.b got since.
// Before, it handed test.b over from its first message (opscheck seed
// 20261217 again, 31 outputs twice).
func TestDurableRenamedWhileNarrowing(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	rt, err := New(env.nc, filterManifest(t, "", "test.in", "test.b"), recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.publish("test.in", "in-1")
	env.publish("test.b", "b-1")
	env.handledExactly(rec, "in-1", "b-1")
	if err := rt.Apply(context.Background(), testManifest(t, "    durable: fn-v2\n")); err != nil {
		t.Fatal(err)
	}
	env.publish("test.b", "b-2") // stored while no consumer of the function reads test.b
	if err := rt.Apply(context.Background(), filterManifest(t, "    durable: fn-v2\n", "test.in", "test.b")); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", "late")
	env.handledExactly(rec, "in-1", "b-1", "b-2", "late")
}

// TestConsumerDeletedAfterANarrowingRolledBack: a deploy drops test.b, its
// rollback reads it again (a backfill hands b-2 over), and the consumer is
// deleted while the function is down. The consumer made again hands
// nothing of test.b over again. Before, the binding the rollback retired
// recorded its floor last, with its own revision's filter (without
// test.b) beside the consumer's notes, which the rollback had used up, so
// the consumer made from that record handed test.b over from its first
// message (opscheck seed 20261220 on 3 nodes: 67 outputs twice, after the
// duplicate window).
func TestConsumerDeletedAfterANarrowingRolledBack(t *testing.T) {
	env := newEnv(t)
	r, rec, both := env.narrowed()
	if err := r.rt.Apply(context.Background(), both); err != nil {
		t.Fatal(err)
	}
	env.handledExactly(rec, "in-1", "b-1", "b-2")
	runtimetest.Eventually(t, 10*time.Second, "the backfill done", func() bool {
		_, err := env.js.Consumer(context.Background(), "TEST", "fn-backfill-a")
		return err != nil
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := env.js.DeleteConsumer(context.Background(), "TEST", "fn"); err != nil {
		t.Fatal(err)
	}
	env.start(both, rec)
	env.publish("test.in", "late")
	env.handledExactly(rec, "in-1", "b-1", "b-2", "late")
}

// TestNarrowedWhileAMessageWaitsForItsRetry: b-1 failed and waits for its
// retry when a deploy drops test.b and adds test.c (the change resets the
// consumer to its ack floor, which forgets b-1's delivery, and the new
// filter passes over it); a later deploy reads test.b again, and b-1 is
// handled then. Before, the note of how far test.b was handled was the
// consumer's delivered sequence, past b-1, so the later backfill began
// after it and b-1 was never handled (opscheck seed 20261222 on 3 nodes: a
// keyed function's router, reset after a narrowing, lost 12 messages).
func TestNarrowedWhileAMessageWaitsForItsRetry(t *testing.T) {
	env := newEnv(t)
	var failed atomic.Bool
	rec := &recorder{result: func(msg jetfn.Msg) error {
		if string(msg.Data) == "b-1" && failed.CompareAndSwap(false, true) {
			return errors.New("fails once")
		}
		return nil
	}}
	const slowRetry = "    backoff: [5s]\n"
	rt, err := New(env.nc, filterManifest(t, slowRetry, "test.in", "test.b"), recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.publish("test.b", "b-1")
	env.publish("test.in", "in-1")
	runtimetest.Eventually(t, 10*time.Second, "b-1 failed and in-1 handled", func() bool { return rec.count() == 2 })
	ctx := context.Background()
	if err := rt.Apply(ctx, filterManifest(t, slowRetry, "test.in", "test.c")); err != nil {
		t.Fatal(err)
	}
	if err := rt.Apply(ctx, filterManifest(t, slowRetry, "test.in", "test.b", "test.c")); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", "late")
	// in-1 may come once more: the reset hands again what was acked above
	// the floor b-1 held (settleThrough).
	env.handledEach(rec, "b-1", "in-1", "late")
	runtimetest.Eventually(t, 15*time.Second, "b-1 tried again", func() bool {
		return slices.ContainsFunc(rec.all()[2:], func(d recorded) bool { return string(d.msg.Data) == "b-1" })
	})
}
