package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// ticks records every run of a scheduled function.
type ticks struct {
	mu   sync.Mutex
	runs []tickRun
}

type tickRun struct {
	seq       uint64
	published time.Time
	scheduler string
	next      time.Time
	ran       time.Time
	delivered uint64
}

func (k *ticks) Handle(_ context.Context, msg jetfn.Msg) error {
	next, _ := time.Parse(time.RFC3339Nano, msg.Header.Get(scheduleNextHeader))
	k.mu.Lock()
	defer k.mu.Unlock()
	k.runs = append(k.runs, tickRun{seq: msg.StreamSequence, published: msg.Published, scheduler: msg.Header.Get(schedulerHeader),
		next: next, ran: time.Now(), delivered: msg.NumDelivered})
	return nil
}

func (k *ticks) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.runs)
}

func (k *ticks) snapshot() []tickRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]tickRun(nil), k.runs...)
}

// tickManifest is fn triggered every second on test.tick.
func tickManifest(t *testing.T, schedule string) *manifest.Manifest {
	t.Helper()
	return subjectManifest(t, "test.tick", "    schedule: "+schedule+"\n")
}

// storedOn counts the messages stream TEST holds on subject.
func (e *testEnv) storedOn(subject string) uint64 { return e.storedUnder(subject) }

// storedSchedule is the schedule stream TEST keeps for subject ("": none;
// a message without one on the schedule subject ends its ticks).
func (e *testEnv) storedSchedule(subject string) string {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), "TEST")
	if err != nil {
		e.t.Fatal(err)
	}
	stored, err := s.GetLastMsgForSubject(context.Background(), subject+manifest.ScheduleSubjectSuffix)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return stored.Header.Get(scheduleHeader)
}

// TestScheduleTicksOnceAcrossInstances: every: 1s makes the server store a
// tick on the function's subject each second, from one schedule message
// though two instances started together; each tick runs once across
// them, carrying its time (Published), the schedule's subject and the
// next tick's time.
func TestScheduleTicksOnceAcrossInstances(t *testing.T) {
	env := newEnv(t)
	h := &ticks{}
	m := tickManifest(t, "{every: 1s}")
	env.start(m, h)
	env.start(m, h)
	runtimetest.Eventually(t, 20*time.Second, "three ticks", func() bool { return h.count() >= 3 })
	if n := env.storedOn("test.tick.jetfn-schedule"); n != 1 {
		t.Fatalf("%d schedule messages stored, want 1", n)
	}
	seen := map[uint64]bool{}
	runs := h.snapshot()
	for i, r := range runs {
		if seen[r.seq] {
			t.Fatalf("tick %d ran twice", r.seq)
		}
		seen[r.seq] = true
		if r.scheduler != "test.tick.jetfn-schedule" || !r.next.After(r.published) {
			t.Fatalf("tick %+v: want the schedule's subject and a next tick after its own time", r)
		}
		if i > 0 && r.published.Sub(runs[i-1].published) < 500*time.Millisecond {
			t.Errorf("ticks %d and %d stored %s apart, want about a second", runs[i-1].seq, r.seq, r.published.Sub(runs[i-1].published))
		}
	}
}

// TestScheduleMissedTicks: ticks stored while no instance ran are, with
// missed: once, run once (the newest; the older are skipped and counted),
// and with missed: skip, never run once their next tick is due.
func TestScheduleMissedTicks(t *testing.T) {
	for _, missed := range []string{manifest.MissedOnce, manifest.MissedSkip} {
		t.Run(missed, func(t *testing.T) {
			env := newEnv(t)
			m := tickManifest(t, "{every: 1s, missed: "+missed+"}")
			first := env.start(m, &ticks{})
			runtimetest.Eventually(t, 20*time.Second, "a tick", func() bool { return env.storedOn("test.tick") >= 1 })
			if err := first.stop(t); err != nil {
				t.Fatal(err)
			}
			stored := env.storedOn("test.tick")
			runtimetest.Eventually(t, 20*time.Second, "three ticks waiting", func() bool { return env.storedOn("test.tick") >= stored+3 })
			h := &ticks{}
			r := env.start(m, h)
			runtimetest.Eventually(t, 20*time.Second, "the backlog skipped", func() bool { return r.rt.Stats()[0].TicksSkipped >= 2 })
			for _, run := range h.snapshot() {
				if missed == manifest.MissedSkip && run.ran.After(run.next) {
					t.Errorf("tick %d ran at %s, after its next tick was due at %s", run.seq, run.ran, run.next)
				}
			}
			if missed == manifest.MissedOnce {
				runtimetest.Eventually(t, 20*time.Second, "a tick run after the restart", func() bool { return h.count() >= 1 })
			}
		})
	}
}

// failingFirstTick fails the first delivery of the first tick it sees,
// and records every run.
type failingFirstTick struct {
	ticks
	failed uint64 // the failed tick's sequence
}

func (f *failingFirstTick) Handle(ctx context.Context, msg jetfn.Msg) error {
	f.mu.Lock()
	first := f.failed == 0 || f.failed == msg.StreamSequence && msg.NumDelivered == 1
	if f.failed == 0 {
		f.failed = msg.StreamSequence
	}
	f.mu.Unlock()
	if first {
		return errors.New("the first tick fails once")
	}
	return f.ticks.Handle(ctx, msg)
}

func (f *failingFirstTick) failedSeq() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// TestScheduleRetriedTickCompletes: a tick whose first delivery failed is
// retried even after its next tick was due, with either missed setting:
// its first attempt may have left effects half done (a document stored,
// its output not published), which only the retry completes. It runs
// after the newer tick.
func TestScheduleRetriedTickCompletes(t *testing.T) {
	for _, missed := range []string{manifest.MissedOnce, manifest.MissedSkip} {
		t.Run(missed, func(t *testing.T) {
			env := newEnv(t)
			h := &failingFirstTick{}
			m := subjectManifest(t, "test.tick", "    schedule: {every: 1s, missed: "+missed+"}\n    backoff: [2500ms]\n    maxDeliver: 3\n")
			env.start(m, h)
			runtimetest.Eventually(t, 20*time.Second, "the failed tick retried", func() bool {
				for _, run := range h.snapshot() {
					if run.seq == h.failedSeq() && run.delivered > 1 {
						return true
					}
				}
				return false
			})
			newer := false
			for _, run := range h.snapshot() {
				newer = newer || run.seq > h.failedSeq()
				if run.seq == h.failedSeq() && run.delivered > 1 && !newer {
					t.Errorf("the retry of tick %d ran before any newer tick: the test did not retry past the next tick", run.seq)
				}
			}
		})
	}
}

// TestStaleTick: which ticks are not to run.
func TestStaleTick(t *testing.T) {
	next := time.Date(2026, 12, 4, 10, 0, 1, 0, time.UTC)
	tick := func(delivered uint64) jetfn.Msg {
		return jetfn.Msg{NumDelivered: delivered, Header: jetfn.Header{schedulerHeader: {"s"}, scheduleNextHeader: {next.Format(time.RFC3339Nano)}}}
	}
	once, skip := &manifest.ScheduleSpec{Missed: manifest.MissedOnce}, &manifest.ScheduleSpec{Missed: manifest.MissedSkip}
	before, after := next.Add(-time.Second), next.Add(time.Second)
	for _, c := range []struct {
		name      string
		spec      *manifest.ScheduleSpec
		msg       jetfn.Msg
		pending   uint64
		begun     bool
		now       time.Time
		wantStale bool
	}{
		{"not scheduled", nil, tick(1), 5, false, after, false},
		{"no scheduler header: a message published by hand", once, jetfn.Msg{NumDelivered: 1}, 5, false, after, false},
		{"once, on time", once, tick(1), 5, false, before, false},
		{"once, late, newest", once, tick(1), 0, false, after, false},
		{"once, late, newer waiting", once, tick(1), 1, false, after, true},
		{"once, retried before the next tick", once, tick(2), 0, false, before, false},
		{"once, delivered again after the next tick was due, never started", once, tick(2), 0, false, after, true},
		{"once, retried after the next tick was due, its handler began", once, tick(2), 0, true, after, false},
		{"once, retried with a newer tick waiting, its handler began", once, tick(2), 1, true, after, false},
		{"skip, on time", skip, tick(1), 0, false, before, false},
		{"skip, late", skip, tick(1), 0, false, after, true},
		{"skip, retried late, its handler began", skip, tick(2), 0, true, after, false},
		{"skip, delivered again late, never started", skip, tick(2), 0, false, after, true},
	} {
		if got := staleTick(c.spec, c.msg, c.pending, c.begun, c.now); (got != "") != c.wantStale {
			t.Errorf("%s: staleTick = %q, want stale %v", c.name, got, c.wantStale)
		}
	}
}

// TestScheduleKeptThroughADeletedStream: a scheduled function whose
// stream someone deleted makes the stream again, and its schedule with
// it: the ticks go on.
func TestScheduleKeptThroughADeletedStream(t *testing.T) {
	env := newEnv(t)
	h := &ticks{}
	env.start(tickManifest(t, "{every: 1s}"), h)
	runtimetest.Eventually(t, 20*time.Second, "a tick", func() bool { return h.count() >= 1 })
	if err := env.js.DeleteStream(context.Background(), "TEST"); err != nil {
		t.Fatal(err)
	}
	before := h.count()
	runtimetest.Eventually(t, 30*time.Second, "ticks in the stream made again", func() bool { return h.count() >= before+2 })
	if stored := env.storedSchedule("test.tick"); stored != "@every 1s" {
		t.Fatalf("schedule %q stored, want @every 1s", stored)
	}
}

// TestScheduleWithoutProvisioningSaysSo: an instance that provisions
// nothing does not write a schedule either, and says so at start, since
// the function then ticks only once an instance that provisions runs.
func TestScheduleWithoutProvisioningSaysSo(t *testing.T) {
	env := newEnv(t)
	m := tickManifest(t, "{every: 1s}")
	provision(t, env.js, m)
	env.start(m, &ticks{}, WithoutProvisioning())
	if !strings.Contains(env.logs.String(), "does not write the function's schedule") {
		t.Fatalf("nothing logged about the schedule:\n%s", env.logs.String())
	}
}

// TestScheduleOnAStreamThatCannotHaveOne: a schedule on an existing
// stream the server cannot turn message schedules on for (discard: new,
// sources, a mirror) is refused before anything changes, naming why.
func TestScheduleOnAStreamThatCannotHaveOne(t *testing.T) {
	for _, c := range []struct {
		cfg  jetstream.StreamConfig
		want string
	}{
		{jetstream.StreamConfig{Discard: jetstream.DiscardNew}, "discard new"},
		{jetstream.StreamConfig{DenyPurge: true}, "deny purge"},
		{jetstream.StreamConfig{AllowRollup: true}, ""},
	} {
		env := newEnv(t)
		ctx := context.Background()
		c.cfg.Name, c.cfg.Subjects = "TEST", []string{"test.>"}
		if _, err := env.js.CreateStream(ctx, c.cfg); err != nil {
			t.Fatal(err)
		}
		m := tickManifest(t, "{every: 1s}")
		refusals, err := ServerRefusals(ctx, env.js, m)
		if err != nil {
			t.Fatal(err)
		}
		if c.want == "" {
			if len(refusals) > 0 {
				t.Errorf("%+v: refusals %q, want none", c.cfg, refusals)
			}
			spec, _ := m.Stream("TEST")
			if err := ensureStream(ctx, env.js, spec); err != nil {
				t.Errorf("%+v: the server refused what ServerRefusals allowed: %v", c.cfg, err)
			}
			continue
		}
		if len(refusals) != 1 || !strings.Contains(refusals[0], c.want) {
			t.Errorf("%+v: refusals = %q, want one naming %s", c.cfg, refusals, c.want)
		}
		spec, _ := m.Stream("TEST")
		if err := ensureStream(ctx, env.js, spec); err == nil {
			t.Errorf("%+v: the server took what ServerRefusals refused", c.cfg)
		}
	}
}

// TestScheduleChangedAndRemoved: a live deploy that changes the schedule
// replaces the schedule message; one that removes it purges it, which
// ends the ticks.
func TestScheduleChangedAndRemoved(t *testing.T) {
	env := newEnv(t)
	r := env.start(tickManifest(t, "{every: 1s}"), &ticks{})
	ctx := context.Background()
	s, err := env.js.Stream(ctx, "TEST")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.rt.Apply(ctx, tickManifest(t, `{cron: "0 3 * * *", timeZone: Europe/Paris}`)); err != nil {
		t.Fatal(err)
	}
	stored, err := s.GetLastMsgForSubject(ctx, "test.tick.jetfn-schedule")
	if err != nil || stored.Header.Get(scheduleHeader) != "0 0 3 * * *" || stored.Header.Get(scheduleTimeZoneHeader) != "Europe/Paris" {
		t.Fatalf("schedule after the deploy: %v, %v; want 0 0 3 * * * in Europe/Paris", stored, err)
	}
	if err := r.rt.Apply(ctx, subjectManifest(t, "test.tick", "")); err != nil {
		t.Fatal(err)
	}
	if stored := env.storedSchedule("test.tick"); stored != "" {
		t.Fatalf("schedule %q stored after the schedule was removed, want none", stored)
	}
}

// TestScheduleKeptThroughARename: a deploy with --prune that renames a
// scheduled function, keeping its subject and schedule, keeps the
// schedule: the old function's prune leaves what the new one keeps.
func TestScheduleKeptThroughARename(t *testing.T) {
	env := newEnv(t)
	old := subjectManifest(t, "test.tick", "    schedule: {every: 1s}\n")
	renamed, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: fn2, version: 1.0.0, stream: TEST, subject: test.tick, schedule: {every: 1s}}
`))
	if err != nil {
		t.Fatal(err)
	}
	h := &ticks{}
	fns := []jetfn.Function{
		{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return &ticks{}, nil }},
		{Name: "fn2", New: func(jetfn.Deps) (jetfn.Handler, error) { return h, nil }}}
	rt, err := New(env.nc, old, fns, WithLogger(env.logger()), WithPrune())
	if err != nil {
		t.Fatal(err)
	}
	r := env.run(rt)
	if err := r.rt.Apply(context.Background(), renamed); err != nil {
		t.Fatal(err)
	}
	if n := env.storedOn("test.tick.jetfn-schedule"); n != 1 {
		t.Fatalf("%d schedule messages after the rename, want 1", n)
	}
	runtimetest.Eventually(t, 20*time.Second, "the renamed function's ticks", func() bool { return h.count() >= 2 })
}

// TestSchedulePermissionsSufficient: a scheduled function run as a user
// with the --provision permissions keeps its schedule and runs its ticks
// with no violation.
func TestSchedulePermissionsSufficient(t *testing.T) {
	out := "    outputs:\n      - subject: test.out\n        stream: TEST\n"
	m := subjectManifest(t, "test.tick", "    schedule: {every: 1s}\n"+out)
	if err := m.Validate([]string{"fn"}); err != nil {
		t.Fatal(err)
	}
	p := startPermsCase(t, m, m.Permissions(manifest.PermissionOptions{Provision: true}), true)
	runtimetest.Eventually(t, 20*time.Second, "a tick's output", func() bool { return p.outputs() >= 1 })
	if n := p.env.storedOn("test.tick.jetfn-schedule"); n != 1 {
		t.Fatalf("%d schedule messages, want 1", n)
	}
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the --provision permissions: %v\n%s", v, p.log.String())
	}
}

// TestScheduleRemovedWithTheNewPermissions: a deploy that removes a
// function's schedule, its instances running with the permissions of the
// new manifest (which schedules nothing), ends the ticks with no
// violation.
func TestScheduleRemovedWithTheNewPermissions(t *testing.T) {
	out := "    outputs:\n      - subject: test.out\n        stream: TEST\n"
	scheduled := subjectManifest(t, "test.tick", "    schedule: {every: 1s}\n"+out)
	unscheduled := subjectManifest(t, "test.tick", out)
	if err := unscheduled.Validate([]string{"fn"}); err != nil {
		t.Fatal(err)
	}
	// What the scheduled revision left: its stream and schedule.
	seed := func(js jetstream.JetStream) {
		ctx := context.Background()
		spec, _ := scheduled.Stream("TEST")
		s, err := js.CreateStream(ctx, streamConfig(spec))
		if err != nil {
			t.Fatal(err)
		}
		f, _ := scheduled.Function("fn")
		if err := ensureSchedule(ctx, js, s, f); err != nil {
			t.Fatal(err)
		}
	}
	p := startPermsCaseAfter(t, unscheduled, unscheduled.Permissions(manifest.PermissionOptions{Provision: true}), true, seed, permsHandler)
	if stored := p.env.storedSchedule("test.tick"); stored != "" {
		t.Fatalf("the removed schedule %q is still stored", stored)
	}
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the new manifest's permissions: %v\n%s", v, p.log.String())
	}
}

// TestScheduleSharedSubject: a function that reads a scheduled function's
// subject without a schedule of its own leaves the schedule alone, at
// start and on a deploy; both get every tick.
func TestScheduleSharedSubject(t *testing.T) {
	env := newEnv(t)
	m := subjectManifest(t, "test.tick", "    version: 1.0.0\n    schedule: {every: 1s}\n  - {name: fn2, version: 1.0.0, stream: TEST, subject: test.tick}\n")
	scheduled, audit := &ticks{}, &ticks{}
	rt, err := New(env.nc, m, []jetfn.Function{
		{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return scheduled, nil }},
		{Name: "fn2", New: func(jetfn.Deps) (jetfn.Handler, error) { return audit, nil }}}, WithLogger(env.logger()))
	if err != nil {
		t.Fatal(err)
	}
	r := env.run(rt)
	if err := r.rt.Apply(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 20*time.Second, "two ticks for each", func() bool { return scheduled.count() >= 2 && audit.count() >= 2 })
	if n := env.storedOn("test.tick.jetfn-schedule"); n != 1 {
		t.Fatalf("%d schedule messages, want the one", n)
	}
}
