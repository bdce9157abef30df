package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestUnstartedDeliveriesDoNotCount is issue 29, item 10: a message that
// kills its process took its whole buffered cohort to the dead letters as
// "delivered N times without a handler result", though their handlers
// never started. Here an instance died at both allowed deliveries of three
// messages: the poison one's handler ran each time (jetfn recorded the
// second run), the other two only waited in its buffer. The next instance
// must dead-letter the poison one and handle the other two. Before the fix
// all three were dead-lettered unhandled.
func TestUnstartedDeliveriesDoNotCount(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	m := testManifest(t, "    maxDeliver: 2\n    ackWait: 1s\n    heartbeat: 300ms\n    backoff: [10ms]\n")
	for _, s := range m.Streams {
		if err := ensureStream(ctx, env.js, s); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := env.js.Stream(ctx, "TEST")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ensureConsumer(ctx, stream, m.Functions[0], m.Digest, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"poison", "cohort-1", "cohort-2"} {
		env.publish("test.in", p)
	}
	for delivery := 1; delivery <= 2; delivery++ { // the instance that died
		batch, err := c.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for range batch.Messages() {
			n++
		}
		if n != 3 {
			t.Fatalf("delivery %d: got %d messages, want 3", delivery, n)
		}
	}
	attempts := openAttempts(ctx, env.js, m, true, testLogger())
	poison := jetfn.Msg{Stream: "TEST", StreamSequence: 1, StreamIdentity: streamIdentityOf(t, env.js, "TEST"), NumDelivered: 2}
	if _, err := attempts.kv.Put(ctx, attemptKey("fn", poison), []byte("1")); err != nil { // its second run, recorded as it started
		t.Fatal(err)
	}

	rec := &recorder{}
	env.start(m, rec)
	letters := env.deadLetters(1)
	runtimetest.Eventually(t, 10*time.Second, "everything settled", func() bool { return env.settled("TEST", "fn", 3) })
	var handled []string
	for _, d := range rec.all() {
		handled = append(handled, string(d.msg.Data))
	}
	if len(letters) != 1 || string(letters[0].Data) != "poison" || len(handled) != 2 {
		var dead []string
		for _, l := range runtimetest.StreamMessages(t, env.js, "DEADLETTER") {
			dead = append(dead, string(l.Data))
		}
		t.Fatalf("dead letters %v, handled %v; want only the poison dead-lettered and the cohort handled", dead, handled)
	}
}

// recordSecondRun writes what jetfn records when the handler of function
// starts a second run on TEST's message seq: a test that plays a dying
// instance with a plain client must record the runs it stands for, or
// they do not count toward maxDeliver.
func recordSecondRun(t *testing.T, env *testEnv, function string, seq uint64) {
	t.Helper()
	ctx := context.Background()
	kv, err := env.js.KeyValue(ctx, manifest.AttemptsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = env.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: manifest.AttemptsBucket, History: 1, TTL: attemptsTTL})
	}
	if err != nil {
		t.Fatal(err)
	}
	msg := jetfn.Msg{Stream: "TEST", StreamIdentity: streamIdentityOf(t, env.js, "TEST"), StreamSequence: seq}
	if _, err := kv.Put(ctx, attemptKey(function, msg), []byte("1")); err != nil {
		t.Fatal(err)
	}
}
