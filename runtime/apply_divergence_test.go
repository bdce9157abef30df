package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// The tests in this file are issue 29, item 6: instances that follow one
// deployment diverged when one of them refused a revision another applied.

// TestRefusedRevisionStillTightensHeartbeat: another instance applied a
// revision that lowers ackWait to 1s; this one refuses it (its binary
// lacks a function the revision adds) and keeps its old bindings. Their
// heartbeat must follow the consumer's new ackWait, or a handler longer
// than 1s is redelivered while it runs. Before the fix this instance kept
// beating every 3.3s and the slow message came a second time.
func TestRefusedRevisionStillTightensHeartbeat(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{result: func(msg jetfn.Msg) error {
		if string(msg.Data) == "slow" {
			time.Sleep(2500 * time.Millisecond)
		}
		return nil
	}}
	rt, err := New(env.nc, twoFunctions(t, "    ackWait: 10s\n", false), recorderFunctions(rec), WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	next := twoFunctions(t, "    ackWait: 1s\n", true) // adds fn2, which this binary lacks
	s, err := env.js.Stream(context.Background(), "TEST")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ensureConsumer(context.Background(), s, next.Functions[0], next.Digest, nil, nil); err != nil {
		t.Fatal(err) // the other instance's Apply
	}
	if err := rt.Apply(context.Background(), next); !errors.Is(err, ErrRefusedManifest) {
		t.Fatalf("Apply = %v, want a refusal", err)
	}
	env.publish("test.in", "slow")
	runtimetest.Eventually(t, 15*time.Second, "the slow message acked", func() bool { return env.settled("TEST", "fn", 1) })
	for _, d := range rec.all() {
		if d.msg.NumDelivered > 1 {
			t.Fatalf("the slow message was delivered again (delivery %d) while its handler ran", d.msg.NumDelivered)
		}
	}
}

// TestRefusedRevisionLeavesOthersConsumers: an Apply that fails half-way
// (fn2's consumer is refused by the server) must not put fn's consumer
// back to the old revision: another instance may have applied the new
// revision, and the revision stays the deployment's current one. Before
// the fix fn's ackWait went back to 10s.
func TestRefusedRevisionLeavesOthersConsumers(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	rec := &recorder{}
	fns := append(recorderFunctions(rec), jetfn.Function{Name: "fn2", New: func(jetfn.Deps) (jetfn.Handler, error) { return rec, nil }})
	rt, err := New(env.nc, twoFunctions(t, "    ackWait: 10s\n", false), fns, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	// fn2's durable already exists as a push consumer: the server refuses
	// to make it the pull consumer the revision declares.
	if _, err := env.js.CreateOrUpdatePushConsumer(ctx, "TEST", jetstream.ConsumerConfig{Durable: "fn2",
		DeliverSubject: "push.fn2", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	next := twoFunctions(t, "    ackWait: 1s\n", true)
	if err := rt.Apply(ctx, next); !errors.Is(err, ErrRefusedManifest) {
		t.Fatalf("Apply = %v, want a refusal", err)
	}
	if got := env.consumerInfo("TEST", "fn").Config.AckWait; got != time.Second {
		t.Errorf("fn's consumer ackWait = %s after the refusal, want the revision's 1s left as it was applied", got)
	}
}
