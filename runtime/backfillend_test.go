package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The tests in this file pin where a backfill ends: it hands over what the
// main consumer passed over, and must not reach what the main consumer
// delivers under its new filter. Both ended at the main consumer's ack
// floor when an instance first bound the backfill, so whatever the main
// consumer delivered and acked between the change and that binding was
// handled twice (stop 43's CI: TestDurableRenamedWhileNarrowing handled
// b-2 twice, one run in three).

// TestWideningWhileAnInstanceStillPulls: another instance widens the
// function's filter while this one, still on the old revision, pulls from
// the consumer and handles a message of the added subject stored after
// the change. The backfill this instance binds next hands over what was
// stored before the change, not that message.
func TestWideningWhileAnInstanceStillPulls(t *testing.T) {
	env := newEnv(t)
	rt, rec := env.passedOverB1()
	wide := filterManifest(t, "", "test.in", "test.b")
	ctx := context.Background()
	if _, err := ensureConsumer(ctx, env.stream("TEST"), wide.Functions[0], wide.Digest, nil, nil); err != nil {
		t.Fatal(err) // the other instance's Apply
	}
	env.publish("test.b", "b-2")
	env.handledExactly(rec, "in-1", "b-2") // by this instance, from the widened consumer
	if err := rt.Apply(ctx, wide); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", "late")
	env.handledExactly(rec, "b-1", "b-2", "in-1", "late")
}

// TestRenamedAndWidenedWhileAnotherInstancePulls: another instance renames
// the durable and adds a subject, and a third, already on the new
// revision, takes a message of the added subject from the new consumer
// before this instance binds it. The backfill the creation made hands over
// what the old durable passed over, not that message.
func TestRenamedAndWidenedWhileAnotherInstancePulls(t *testing.T) {
	env := newEnv(t)
	rt, rec := env.passedOverB1()
	renamed := filterManifest(t, "    durable: fn-v2\n", "test.in", "test.b")
	ctx := context.Background()
	s := env.stream("TEST")
	if _, err := ensureConsumer(ctx, s, renamed.Functions[0], renamed.Digest, nil, rt.positions); err != nil {
		t.Fatal(err) // the other instance's Apply
	}
	env.publish("test.b", "b-2")
	env.takeOne(s, "fn-v2", "b-2") // the third instance
	if err := rt.Apply(ctx, renamed); err != nil {
		t.Fatal(err)
	}
	env.publish("test.in", "late")
	env.handledExactly(rec, "b-1", "in-1", "late")
}

// passedOverB1 runs fn on test.in, stores b-1 on test.b, which it does
// not read, and has it handle in-1.
func (e *testEnv) passedOverB1() (*Runtime, *recorder) {
	e.t.Helper()
	rec := &recorder{}
	rt, err := New(e.nc, testManifest(e.t, ""), recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.run(rt)
	e.publish("test.b", "b-1")
	e.publish("test.in", "in-1")
	e.handledExactly(rec, "in-1")
	return rt, rec
}

// stream looks up the stream named name.
func (e *testEnv) stream(name string) jetstream.Stream {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// takeOne fetches one message from durable, as another instance's binding
// would, checks it is want, and acks it.
func (e *testEnv) takeOne(s jetstream.Stream, durable, want string) {
	e.t.Helper()
	c, err := s.Consumer(context.Background(), durable)
	if err != nil {
		e.t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		e.t.Fatal(err)
	}
	for msg := range batch.Messages() {
		if string(msg.Data()) != want {
			e.t.Fatalf("took %q, want %q", msg.Data(), want)
		}
		if err := msg.DoubleAck(context.Background()); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	e.t.Fatalf("took nothing from %s: %v", durable, batch.Error())
}
