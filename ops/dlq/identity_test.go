package dlq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/ops/dlq"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// idRecorder fails the first delivery of every payload as permanent, so
// it becomes a dead letter, and acks every later one; it records the ID
// the handler saw for each delivery, by payload.
type idRecorder struct {
	mu  sync.Mutex
	ids map[string][]string
}

func (r *idRecorder) Handle(_ context.Context, msg jetfn.Msg) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := r.ids[string(msg.Data)]
	r.ids[string(msg.Data)] = append(seen, msg.ID())
	if len(seen) == 0 {
		return jetfn.Permanent(errors.New("first sight"))
	}
	return nil
}

func (r *idRecorder) seen(payload string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids[payload]...)
}

// TestReplayKeepsIdentity is issue 29, item 1: a replayed dead letter must
// reach the function under the identity of the original message, so that
// effects and outputs keyed by Msg.ID (and a remote's Jetfn-Msg-Id, which
// is Msg.ID) are not made twice, while the copy still gets past the input
// stream's duplicate window. Before the fix the handler saw the replay's
// own Nats-Msg-Id, "<id>:replay:1".
func TestReplayKeepsIdentity(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte(`
streams:
  - name: TEST
    subjects: ["test.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: recorder
    version: 1.0.0
    stream: TEST
    subject: test.in
    ackWait: 5s
    concurrency: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	rec := &idRecorder{ids: map[string][]string{}}
	fns := []jetfn.Function{{Name: "recorder", New: func(jetfn.Deps) (jetfn.Handler, error) { return rec, nil }}}
	rt, err := runtime.New(nc, m, fns)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-rt.Ready()

	inputs := []struct {
		payload string
		header  nats.Header
	}{
		{payload: "with-id", header: nats.Header{"Nats-Msg-Id": {"order-7"}}},
		{payload: "without-id"},
	}
	for _, in := range inputs {
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "test.in", Data: []byte(in.payload), Header: in.header}); err != nil {
			t.Fatal(err)
		}
	}
	store, err := dlq.Open(ctx, js, deadLetters)
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 10*time.Second, "two dead letters", func() bool {
		letters, err := store.List(ctx, "recorder")
		return err == nil && len(letters) == 2
	})
	if _, err := store.ReplayAll(ctx, dlq.Selection{Function: "recorder"}, dlq.ReplayOptions{}, func(r dlq.Replay, err error) {
		if err != nil {
			t.Errorf("replaying %d: %v", r.Seq, err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		runtimetest.Eventually(t, 10*time.Second, "the replay of "+in.payload+" handled", func() bool {
			return len(rec.seen(in.payload)) == 2
		})
		ids := rec.seen(in.payload)
		if ids[0] != ids[1] {
			t.Errorf("%s: the original was handled as %q, its replay as %q; want one identity", in.payload, ids[0], ids[1])
		}
	}
}
