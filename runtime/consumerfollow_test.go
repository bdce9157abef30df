package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestLookFollowsAConsumerMadeAgainElsewhere: another instance made the
// stream and the consumer again (an operator deleted the stream) while
// this handle did not pull, as a standby router does not. Its next look
// records the floor under the new incarnation's identity. Before, it
// recorded the new consumer's floor under the old identity, overwriting
// the good record, and a router consumer deleted later with every
// instance down was made again from the input's first message (opscheck
// seed 20261211: 50 dead letters written twice).
func TestLookFollowsAConsumerMadeAgainElsewhere(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	h, m, positions := env.recordingHandle()
	f := m.Functions[0]

	// Elsewhere: the stream is deleted and made again, with the consumer,
	// and the consumer acknowledges one message of the new incarnation.
	s, again := env.madeAgainElsewhere(m)
	env.publish("test.in", "new-1")
	batch, err := again.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for msg := range batch.Messages() {
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}

	h.look(ctx)
	now := StreamIdentity(s.CachedInfo().Created)
	pos, err := positions.lookup(ctx, f.Stream, f.Durable)
	if err != nil || pos == nil {
		t.Fatalf("no position recorded (%v)", err)
	}
	if pos.StreamIdentity != now || pos.AckFloor != 1 {
		t.Fatalf("recorded floor %d on incarnation %s; want floor 1 on the stream's present incarnation %s", pos.AckFloor, pos.StreamIdentity, now)
	}
	if got := h.streamIdentity(); got != now {
		t.Fatalf("the handle reads incarnation %s; want %s", got, now)
	}
}

// TestRecreateRecordsAtOnce: a handle that makes its stream and consumer
// again (an operator deleted the stream) records the new consumer's
// position at once, under the new incarnation. Before, the record kept the
// old incarnation until the next look, 30 seconds on, and a durable
// renamed meanwhile found no position and started from the stream's first
// message (opscheck seed 20261217).
func TestRecreateRecordsAtOnce(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	h, m, positions := env.recordingHandle()
	f := m.Functions[0]
	h.record(ctx)
	if err := env.js.DeleteStream(ctx, f.Stream); err != nil {
		t.Fatal(err)
	}
	h.look(ctx) // finds the consumer gone and makes stream and consumer again
	s, err := env.js.Stream(ctx, f.Stream)
	if err != nil {
		t.Fatalf("the stream was not made again: %v", err)
	}
	now := StreamIdentity(s.CachedInfo().Created)
	pos, err := positions.lookup(ctx, f.Stream, f.Durable)
	if err != nil || pos == nil {
		t.Fatalf("no position recorded (%v)", err)
	}
	if pos.StreamIdentity != now {
		t.Fatalf("recorded on incarnation %s; want the stream's present incarnation %s", pos.StreamIdentity, now)
	}
}

// recordingHandle is a provisioning consumer handle for testManifest's
// function on its stream, made here, recording in the positions bucket.
func (e *testEnv) recordingHandle() (*consumerHandle, *manifest.Manifest, *positionStore) {
	e.t.Helper()
	ctx := context.Background()
	m := testManifest(e.t, "")
	f := m.Functions[0]
	streamSpec, _ := m.Stream(f.Stream)
	if err := ensureStream(ctx, e.js, streamSpec); err != nil {
		e.t.Fatal(err)
	}
	positions := openPositions(ctx, e.js, m, true, testLogger())
	s, err := e.js.Stream(ctx, f.Stream)
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := s.CreateOrUpdateConsumer(ctx, consumerConfig(f, m.Digest))
	if err != nil {
		e.t.Fatal(err)
	}
	return newConsumerHandle(e.js, f, streamSpec, m.Digest, true, testLogger(), c, s.CachedInfo().Created, positions), m, positions
}

// TestBusyInstanceFollowsAStreamMadeAgain: while this instance's only
// worker is busy, so that it has no pull open, an operator deletes the
// stream and another instance makes stream and consumer again. The first
// message this instance takes afterwards is named by the new incarnation.
// Before, its pulls reached the new consumer by name and it named what
// they brought by the old incarnation until its next look, 30 seconds on
// (opscheck seed 20261218 on 3 nodes: one input handled under both
// identities, two summaries).
func TestBusyInstanceFollowsAStreamMadeAgain(t *testing.T) {
	env := newEnv(t)
	release := make(chan struct{})
	rec := &recorder{result: func(msg jetfn.Msg) error {
		if string(msg.Data) == "busy" {
			<-release
		}
		return nil
	}}
	m := testManifest(t, "    concurrency: 1\n    prefetch: 0\n")
	env.start(m, rec)
	env.publish("test.in", "old-1")
	env.publish("test.in", "old-2")
	env.publish("test.in", "busy")
	runtimetest.Eventually(t, 10*time.Second, "the busy message taken", func() bool { return rec.count() == 3 })

	s, _ := env.madeAgainElsewhere(m)
	env.publish("test.in", "after")
	close(release)

	runtimetest.Eventually(t, 10*time.Second, "the message of the new incarnation handled", func() bool { return rec.count() == 4 })
	got := rec.all()[3].msg
	if want := StreamIdentity(s.CachedInfo().Created); string(got.Data) != "after" || got.StreamIdentity != want {
		t.Fatalf("handled %q named by incarnation %s; want \"after\" named by the new incarnation %s", got.Data, got.StreamIdentity, want)
	}
}

// TestLookTakesTheConsumersOwnStream: a handle made with a stream looked
// up before its consumer was found, while an operator deleted the stream
// and another instance made both again (a deploy's connect that took
// seconds in a 3-node cluster), reads the incarnation its consumer lives
// on after its next look. Before, a look compared only the consumer, found
// the one it held, and the handle named every message by the stream gone
// (opscheck seed 20261218 after the fix above: five inputs of the new
// stream taken for the old one's messages of the same sequences, lost).
func TestLookTakesTheConsumersOwnStream(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	m := testManifest(t, "")
	f := m.Functions[0]
	streamSpec, _ := m.Stream(f.Stream)
	if err := ensureStream(ctx, env.js, streamSpec); err != nil {
		t.Fatal(err)
	}
	gone := env.stream(f.Stream).CachedInfo().Created
	s, c := env.madeAgainElsewhere(m)
	positions := openPositions(ctx, env.js, m, true, testLogger())
	h := newConsumerHandle(env.js, f, streamSpec, m.Digest, true, testLogger(), c, gone, positions)

	h.look(ctx)
	if got, want := h.streamIdentity(), StreamIdentity(s.CachedInfo().Created); got != want {
		t.Fatalf("the handle reads incarnation %s; want its consumer's stream's %s", got, want)
	}
}

// madeAgainElsewhere deletes the stream of m's function and makes it and
// the function's consumer again, as another instance's consumer handle
// does after an operator deleted the stream.
func (e *testEnv) madeAgainElsewhere(m *manifest.Manifest) (jetstream.Stream, jetstream.Consumer) {
	e.t.Helper()
	ctx := context.Background()
	f := m.Functions[0]
	streamSpec, _ := m.Stream(f.Stream)
	if err := e.js.DeleteStream(ctx, f.Stream); err != nil {
		e.t.Fatal(err)
	}
	if err := recreateStream(ctx, e.js, streamSpec); err != nil {
		e.t.Fatal(err)
	}
	s := e.stream(f.Stream)
	c, err := s.CreateOrUpdateConsumer(ctx, consumerConfig(f, m.Digest))
	if err != nil {
		e.t.Fatal(err)
	}
	return s, c
}
