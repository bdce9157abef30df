package rewind_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/ops/rewind"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// withOutputs is the greeter with an output stream whose duplicate window
// is 2 minutes: what a rewind must weigh.
var withOutputs = "allowShortWindow: true\n" + strings.Replace(runtest.Manifest, "functions:", `  - name: OUT
    subjects: ["out.>"]
    duplicates: 2m
functions:`, 1) + `    outputs:
      - {subject: out.greeting, stream: OUT}
`

// TestRewindHandlesAgain: rewound to a sequence or a time, the greeter's
// consumer delivers from there again; the plan counts the messages
// handled again, and those whose outputs fall outside the output
// stream's duplicate window at the time asked.
func TestRewindHandlesAgain(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	rt := runtest.Start(t, nc, withOutputs)
	for range 3 {
		runtest.Publish(t, nc, "test.in", `{"name":"a"}`, "")
	}
	runtimetest.Eventually(t, 10*time.Second, "three handled", func() bool { return runtest.Settled(rt, "greeter", 3) })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte(withOutputs))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := m.Function("greeter")
	ctx := context.Background()
	now := time.Now()
	p, err := rewind.MakePlan(ctx, js, m, f, rewind.Target{Seq: 2}, now)
	if err != nil || p.To != 2 || p.Again() != 2 || p.Skipped() != 0 || p.Window != 2*time.Minute || p.Outside != 0 {
		t.Fatalf("plan to seq 2 = %+v, %v; want 2 handled again, none outside the 2m window", p, err)
	}
	if late, err := rewind.MakePlan(ctx, js, m, f, rewind.Target{Seq: 2}, now.Add(time.Hour)); err != nil || late.Outside != 2 {
		t.Fatalf("plan an hour later = %+v, %v; want both outside the window", late, err)
	}
	s, err := js.Stream(ctx, "TEST")
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	byTime, err := rewind.MakePlan(ctx, js, m, f, rewind.Target{Time: second.Time}, now)
	if err != nil || byTime.To != 2 {
		t.Fatalf("plan to the second message's time = %+v, %v; want seq 2", byTime, err)
	}
	if err := rewind.Apply(ctx, js, p); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 10*time.Second, "the two handled again", func() bool { return runtest.Settled(rt, "greeter", 5) })
	c, err := s.Consumer(ctx, "greeter")
	if err != nil {
		t.Fatal(err)
	}
	if info := c.CachedInfo(); info.Delivered.Stream != 3 || info.NumPending != 0 {
		t.Fatalf("consumer after the rewind: delivered up to %d, %d pending; want 3 and 0", info.Delivered.Stream, info.NumPending)
	}
	consumers := s.ListConsumers(ctx)
	n := 0
	for range consumers.Info() {
		n++
	}
	if n != 1 {
		t.Errorf("%d consumers on TEST after the plans: the counting consumers stayed", n)
	}
}

// TestRewindKeyedRefused: a keyed function has nothing to rewind to.
func TestRewindKeyedRefused(t *testing.T) {
	f := manifest.FunctionSpec{Name: "fn", Ordered: true, Key: &manifest.KeySpec{Token: 2}}
	if _, err := rewind.MakePlan(context.Background(), nil, nil, f, rewind.Target{Seq: 1}, time.Now()); !errors.Is(err, rewind.ErrKeyed) {
		t.Fatalf("err = %v, want ErrKeyed", err)
	}
}

// TestRewindDebouncedRefused: a debounced function's inputs are
// remembered by their receipts, so a rewind would run some again and not
// others.
func TestRewindDebouncedRefused(t *testing.T) {
	f := manifest.FunctionSpec{Name: "fn", Debounce: time.Second, Key: &manifest.KeySpec{Token: 2}}
	if _, err := rewind.MakePlan(context.Background(), nil, nil, f, rewind.Target{Seq: 1}, time.Now()); !errors.Is(err, rewind.ErrDebounced) {
		t.Fatalf("err = %v, want ErrDebounced", err)
	}
}

// TestPlanArithmetic: a rewind back counts what is handled again, one
// forward what is skipped.
func TestPlanArithmetic(t *testing.T) {
	back := rewind.Plan{Ahead: 2, From: 7}
	forward := rewind.Plan{Ahead: 7, From: 2}
	if back.Again() != 5 || back.Skipped() != 0 || forward.Again() != 0 || forward.Skipped() != 5 {
		t.Fatalf("back again %d skipped %d, forward again %d skipped %d; want 5 0 0 5",
			back.Again(), back.Skipped(), forward.Again(), forward.Skipped())
	}
}

// TestRewindRefusesWhatTheServerRefuses: the server resets a consumer
// only to or after where it was configured to start; a function started
// at new messages, or at a time, cannot be rewound before that, and the
// plan says so before anything is asked or confirmed.
func TestRewindRefusesWhatTheServerRefuses(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TEST", Subjects: []string{"test.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := js.Publish(ctx, "test.in", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	third, err := s.GetMsg(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte(runtest.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := m.Function("greeter")
	for _, c := range []struct {
		name   string
		cfg    jetstream.ConsumerConfig
		to     uint64
		refuse string
	}{
		{"new", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}, 1, "new messages"},
		{"sequence", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 3}, 2, "sequence 3"},
		{"time", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &third.Time}, 1, "sequence 3"},
		{"sequence, at its start", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 3}, 3, ""},
	} {
		cfg := c.cfg
		cfg.Durable, cfg.FilterSubject, cfg.AckPolicy = "greeter", "test.in", jetstream.AckExplicitPolicy
		if _, err := s.CreateConsumer(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		p, err := rewind.MakePlan(ctx, js, m, f, rewind.Target{Seq: c.to}, time.Now())
		switch {
		case c.refuse == "" && err != nil:
			t.Errorf("%s: rewind to %d refused: %v", c.name, c.to, err)
		case c.refuse == "":
			if err := rewind.Apply(ctx, js, p); err != nil {
				t.Errorf("%s: the server refused a plan MakePlan allowed: %v", c.name, err)
			}
		case !errors.Is(err, rewind.ErrBeforeStart) || !strings.Contains(err.Error(), c.refuse):
			t.Errorf("%s: rewind to %d: err = %v; want ErrBeforeStart naming %q", c.name, c.to, err, c.refuse)
		}
		if err := s.DeleteConsumer(ctx, "greeter"); err != nil {
			t.Fatal(err)
		}
	}
}
