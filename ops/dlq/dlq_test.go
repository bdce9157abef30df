package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/ops/dlq"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

var deadLetters = manifest.DeadLetterSpec{Stream: "DEADLETTER", SubjectPrefix: "deadletter"}

// env is a running greeter whose poison and malformed messages are dead
// letters 1 and 2.
type env struct {
	t     *testing.T
	js    jetstream.JetStream
	rt    *runtime.Runtime
	store *dlq.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	rt := runtest.Start(t, nc, runtest.Manifest)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, js: js, rt: rt}
	e.publish(`{"name":"poison"}`, nats.Header{"Nats-Msg-Id": {"greet-7"}, "X-Trace": {"abc"}})
	e.waitDeadLettered(1) // one at a time: the two workers would race for the order
	e.publish(`not json`, nil)
	e.waitDeadLettered(2)
	e.publish(`{"name":"ok"}`, nil)
	runtimetest.Eventually(t, 10*time.Second, "three settled", func() bool { return runtest.Settled(rt, "greeter", 3) })
	e.store, err = dlq.Open(context.Background(), js, deadLetters)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) publish(data string, h nats.Header) {
	e.t.Helper()
	if _, err := e.js.PublishMsg(context.Background(), &nats.Msg{Subject: "test.in", Data: []byte(data), Header: h}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) waitDeadLettered(n uint64) {
	e.t.Helper()
	runtimetest.Eventually(e.t, 10*time.Second, "dead letters", func() bool {
		s := e.rt.Stats()[0]
		return s.DeadLettered >= n && s.InFlight == 0 && s.NumAckPending == 0 && s.NumPending == 0
	})
}

func TestListAndGet(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		function string
		wantSeqs []uint64
	}{
		{name: "all", wantSeqs: []uint64{1, 2}},
		{name: "one function", function: "greeter", wantSeqs: []uint64{1, 2}},
		{name: "a function without dead letters", function: "nobody"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			letters, err := e.store.List(ctx, tt.function)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []uint64
			for _, l := range letters {
				seqs = append(seqs, l.Seq)
			}
			if !equal(seqs, tt.wantSeqs) {
				t.Fatalf("List(%q) = %v, want %v", tt.function, seqs, tt.wantSeqs)
			}
		})
	}
	l, err := e.store.Get(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if l.Function != "greeter" || l.OriginalSubject != "test.in" || l.OriginalStream != "TEST" || l.OriginalSeq != 1 ||
		l.OriginalMsgID != "greet-7" || l.NumDelivered != 1 || !strings.Contains(l.Error, "poisoned greeting") ||
		string(l.Data) != `{"name":"poison"}` || l.Header.Get("X-Trace") != "abc" {
		t.Errorf("Get(1) = %+v", l)
	}
	if _, err := e.store.Get(ctx, 99); !errors.Is(err, dlq.ErrNotFound) {
		t.Errorf("Get(99) = %v, want ErrNotFound", err)
	}
}

// TestReplay replays the poison message: the original subject gets the
// payload and headers under <id>:replay:1, the dead letter is gone, and a
// second replay is refused. The greeter fails it again, and replaying that
// dead letter counts on to replay:2.
func TestReplay(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, err := e.store.Replay(ctx, 1, dlq.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.MsgID != "greet-7:replay:1" || r.Attempt != 1 || r.Subject != "test.in" || r.Stream != "TEST" || r.StoredSeq != 4 || r.Duplicate {
		t.Errorf("Replay = %+v, want greet-7:replay:1 stored as TEST 4", r)
	}
	test, err := e.js.Stream(ctx, "TEST")
	if err != nil {
		t.Fatal(err)
	}
	m, err := test.GetMsg(ctx, r.StoredSeq)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "test.in" || string(m.Data) != `{"name":"poison"}` || m.Header.Get("Nats-Msg-Id") != "greet-7:replay:1" || m.Header.Get(jetfn.HeaderReplayOf) != "greet-7" ||
		m.Header.Get("X-Trace") != "abc" || m.Header.Get(wire.HeaderFunction) != "" || m.Header.Get(wire.HeaderError) != "" {
		t.Errorf("replayed message %s %q %v, want the original payload and headers under the new ID", m.Subject, m.Data, m.Header)
	}
	if _, err := e.store.Get(ctx, 1); !errors.Is(err, dlq.ErrNotFound) {
		t.Errorf("dead letter 1 after its replay: %v, want it deleted", err)
	}
	for _, force := range []bool{false, true} {
		if _, err := e.store.Replay(ctx, 1, dlq.ReplayOptions{Force: force}); !errors.Is(err, dlq.ErrAlreadyReplayed) {
			t.Errorf("second replay (force %v) = %v, want ErrAlreadyReplayed", force, err)
		}
	}

	e.waitDeadLettered(3) // the greeter refuses the poison again
	letters, err := e.store.List(ctx, "greeter")
	if err != nil || len(letters) != 2 || letters[1].OriginalMsgID != "greet-7:replay:1" {
		t.Fatalf("dead letters after the replay failed again: %+v, %v", letters, err)
	}
	r, err = e.store.Replay(ctx, letters[1].Seq, dlq.ReplayOptions{})
	if err != nil || r.MsgID != "greet-7:replay:2" || r.Attempt != 2 {
		t.Errorf("replaying the replay's dead letter = %+v, %v; want greet-7:replay:2", r, err)
	}
}

// TestReplayWithoutMsgID: the original had no Nats-Msg-Id, so the replay's
// ID is built on its identity <stream>@<stream identity>:<sequence>.
func TestReplayWithoutMsgID(t *testing.T) {
	e := newEnv(t)
	want := e.identityOf(2) + ":replay:1"
	r, err := e.store.Replay(context.Background(), 2, dlq.ReplayOptions{})
	if err != nil || r.MsgID != want {
		t.Fatalf("Replay = %+v, %v; want %s", r, err, want)
	}
}

// identityOf is the identity the greeter saw for dead letter seq's
// original, checked to be <stream>@<stream identity>:<sequence>.
func (e *env) identityOf(seq uint64) string {
	e.t.Helper()
	l, err := e.store.Get(context.Background(), seq)
	if err != nil {
		e.t.Fatal(err)
	}
	want := fmt.Sprintf("%s@%s:%d", l.OriginalStream, l.OriginalStreamIdentity, l.OriginalSeq)
	if l.OriginalStreamIdentity == "" || l.Identity != want {
		e.t.Fatalf("dead letter %d: identity %q, stream identity %q; want %s", seq, l.Identity, l.OriginalStreamIdentity, want)
	}
	return l.Identity
}

// TestDryRun changes nothing: the dead letter stays, the original stream
// gets nothing, no replay bucket is created.
func TestDryRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, err := e.store.Replay(ctx, 1, dlq.ReplayOptions{DryRun: true})
	if err != nil || !r.DryRun || r.MsgID != "greet-7:replay:1" || r.StoredSeq != 0 {
		t.Fatalf("dry run = %+v, %v", r, err)
	}
	var n int
	_, err = e.store.ReplayAll(ctx, dlq.Selection{}, dlq.ReplayOptions{DryRun: true}, func(dlq.Replay, error) { n++ })
	if err != nil || n != 2 {
		t.Fatalf("dry run of all = %v after %d reports, want 2", err, n)
	}
	if _, err := e.store.Get(ctx, 1); err != nil {
		t.Errorf("dead letter after a dry run: %v", err)
	}
	test, _ := e.js.Stream(ctx, "TEST")
	if info, err := test.Info(ctx); err != nil || info.State.LastSeq != 3 {
		t.Errorf("TEST after a dry run: %+v, %v; want nothing past sequence 3", info.State, err)
	}
	if _, err := e.js.KeyValue(ctx, dlq.Bucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("replay bucket after a dry run: %v, want none", err)
	}
}

func TestReplayAll(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var got []string
	second := e.identityOf(2) + ":replay:1"
	failed, err := e.store.ReplayAll(ctx, dlq.Selection{Function: "greeter"}, dlq.ReplayOptions{}, func(r dlq.Replay, err error) {
		if err != nil {
			t.Errorf("replaying %d: %v", r.Seq, err)
		}
		got = append(got, r.MsgID)
	})
	if err != nil || failed != 0 || !equal(got, []string{"greet-7:replay:1", second}) {
		t.Fatalf("ReplayAll = %d failed, %v, ids %v", failed, err, got)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReplaySelection: a bulk replay picks by error text (any case) and
// by the time a dead letter was stored, and says its progress.
func TestReplaySelection(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	second, err := e.store.Get(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	seqs := func(sel dlq.Selection) []uint64 {
		letters, err := e.store.Select(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		out := []uint64{}
		for _, l := range letters {
			out = append(out, l.Seq)
		}
		return out
	}
	tests := []struct {
		name string
		sel  dlq.Selection
		want []uint64
	}{
		{"error text", dlq.Selection{ErrorContains: "POISONED"}, []uint64{1}},
		{"since", dlq.Selection{Since: second.Stored}, []uint64{2}},
		{"until", dlq.Selection{Until: second.Stored}, []uint64{1}},
		{"function and error", dlq.Selection{Function: "greeter", ErrorContains: "nothing like it"}, []uint64{}},
	}
	for _, tt := range tests {
		if got := seqs(tt.sel); !equal(got, tt.want) {
			t.Errorf("%s: selected %v, want %v", tt.name, got, tt.want)
		}
	}
	var progress []string
	opts := dlq.ReplayOptions{Progress: func(done, total, failed int) { progress = append(progress, fmt.Sprint(done, "/", total, " ", failed)) }}
	var replayed []uint64
	failed, err := e.store.ReplayAll(ctx, dlq.Selection{ErrorContains: "poisoned"}, opts, func(r dlq.Replay, err error) { replayed = append(replayed, r.Seq) })
	if err != nil || failed != 0 || !equal(replayed, []uint64{1}) || !equal(progress, []string{"1/1 0"}) {
		t.Fatalf("ReplayAll = %d failed, %v, replayed %v, progress %v; want only 1, one progress line", failed, err, replayed, progress)
	}
}

// TestDeadLetterTooLargeKeepsItsPlace: a poison message whose payload,
// with the dead letter's headers, is larger than the server takes is
// dead-lettered without its payload, saying so and where the original is
// (kept for redelivery instead, it would fail to be dead-lettered on every
// delivery, for ever); a replay refuses it rather than hand the function
// an empty message.
func TestDeadLetterTooLargeKeepsItsPlace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nc := e.js.Conn()
	payload := `{"name":"poison","pad":"` + strings.Repeat("x", int(nc.MaxPayload())-200) + `"}`
	e.publish(payload, nil)
	e.waitDeadLettered(3)
	letters, err := e.store.List(ctx, "greeter")
	if err != nil || len(letters) != 3 {
		t.Fatalf("dead letters %+v, %v; want 3", letters, err)
	}
	l := letters[2]
	if l.PayloadOmitted != len(payload) || len(l.Data) != 0 || l.OriginalSeq != 4 || l.OriginalStream != "TEST" {
		t.Errorf("dead letter %+v, want no payload, its size %d, and the original TEST 4", l, len(payload))
	}
	var shown strings.Builder
	if err := dlq.WriteLetter(&shown, l); err != nil || !strings.Contains(shown.String(), "left out") {
		t.Errorf("dlq show says %q (%v), want the payload left out", shown.String(), err)
	}
	if _, err := e.store.Replay(ctx, l.Seq, dlq.ReplayOptions{}); !errors.Is(err, dlq.ErrPayloadOmitted) {
		t.Errorf("replay = %v, want ErrPayloadOmitted", err)
	}
}
