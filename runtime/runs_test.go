package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// TestRunRingBounds fills a small ring past its size with oversized runs:
// it keeps the newest, newest first, and no run holds more than
// MaxRunBytes. Pure logic.
func TestRunRingBounds(t *testing.T) {
	b := &binding{spec: manifest.FunctionSpec{Name: "fn", Stream: "TEST", MaxDeliver: 3}, runs: newRunRing(4)}
	huge := strings.Repeat("x", 100_000)
	for seq := uint64(1); seq <= 6; seq++ {
		d := &delivery{}
		ctx := &d.run
		ctx.reset(context.Background(), time.Time{}, 1)
		for range wire.MaxRunOutputs + 3 {
			noteOutput(ctx, huge, huge, 10, &jetstream.PubAck{Stream: huge, Sequence: seq})
		}
		msg := jetfn.Msg{Subject: huge, Data: []byte(huge), StreamSequence: seq, NumDelivered: 1,
			Header: jetfn.Header{"Nats-Msg-Id": {huge}, "traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
		b.recordRun(d, msg, time.Now(), time.Millisecond, errors.New(huge))
	}
	runs := b.runs.list(0)
	if len(runs) != 4 || runs[0].ID != "6.1" || runs[3].ID != "3.1" {
		t.Fatalf("ring of 4 after 6 runs holds %d, newest %q, oldest %q; want 6.1 … 3.1", len(runs), runs[0].ID, runs[len(runs)-1].ID)
	}
	for i := range b.runs.slots {
		if got := runBytes(&b.runs.slots[i]); got > MaxRunBytes {
			t.Errorf("slot %d holds %d bytes, more than MaxRunBytes %d", i, got, MaxRunBytes)
		}
	}
	r, ok := b.runs.find("5.1")
	if !ok || len(r.Payload) != wire.MaxRunPayload || r.PayloadSize != len(huge) || r.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		len(r.Outputs) != wire.MaxRunOutputs || r.OutputsDropped != 3 || r.Outcome != "retry" {
		t.Errorf("find(5.1) = %v: %d payload bytes of %d, trace %q, %d outputs (%d dropped), outcome %q",
			ok, len(r.Payload), r.PayloadSize, r.TraceID, len(r.Outputs), r.OutputsDropped, r.Outcome)
	}
	if _, ok := b.runs.find("1.1"); ok {
		t.Error("find(1.1) found a run the ring overwrote")
	}
	t.Logf("MaxRunBytes = %d, so %d runs take at most %.1f MB", MaxRunBytes, wire.RunHistory, float64(wire.RunHistory*MaxRunBytes)/1e6)
}

// runBytes is what a slot holds: its fixed fields and the bytes behind its
// strings and slices.
func runBytes(r *wire.Run) int {
	n := int(unsafe.Sizeof(*r)) + len(r.Subject) + len(r.MsgID) + len(r.TraceID) + len(r.Error) + cap(r.Payload)
	n += cap(r.Outputs) * int(unsafe.Sizeof(wire.RunOutput{}))
	for _, o := range r.Outputs {
		n += len(o.Subject) + len(o.MsgID) + len(o.Stream)
	}
	return n
}

// TestRunsEndpoint runs a function that publishes an output for one
// message and fails another for good, on two instances, and gathers the
// runs endpoint of both: every run is there once, with its outcome,
// outputs and, asked by ID, its payload.
func TestRunsEndpoint(t *testing.T) {
	env := newEnv(t)
	m := testManifest(t, "    concurrency: 2\n    outputs:\n      - subject: test.out\n        stream: TEST\n")
	fn := jetfn.Function{Name: "fn", New: func(deps jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
			if string(msg.Data) == "poison" {
				return jetfn.Permanent(errors.New("poisoned"))
			}
			return deps.Publisher.Publish(ctx, "test.out", []byte("out:"+string(msg.Data)), string(msg.Data))
		}), nil
	}}
	for range 2 {
		rt, err := New(runtimetest.Connect(t, env.nc.ConnectedUrl()), m, []jetfn.Function{fn}, WithLogger(testLogger()))
		if err != nil {
			t.Fatal(err)
		}
		runtimetest.RunInBackground(t, rt)
	}
	env.publish("test.in", "hello")
	env.publish("test.in", "poison")
	var replies []wire.RunsReply
	runtimetest.Eventually(t, 20*time.Second, "both runs from two instances", func() bool {
		replies = gatherRuns(t, env.nc, wire.RunsRequest{})
		n := 0
		for _, r := range replies {
			n += len(r.Runs)
		}
		return len(replies) == 2 && n == 2
	})
	byData := map[string]wire.Run{}
	for _, reply := range replies {
		if reply.Function != "fn" || reply.Instance == "" || reply.Capacity != wire.RunHistory {
			t.Errorf("reply %+v lacks its function, instance or capacity", reply)
		}
		for _, r := range reply.Runs {
			full := gatherRuns(t, env.nc, wire.RunsRequest{Run: r.ID})
			found := 0
			for _, f := range full {
				for _, fr := range f.Runs {
					found++
					byData[string(fr.Payload)] = fr
				}
			}
			if found != 1 {
				t.Errorf("run %s asked by ID came back %d times, want once", r.ID, found)
			}
		}
	}
	ok, poison := byData["hello"], byData["poison"]
	if ok.Outcome != "ack" || len(ok.Outputs) != 1 || ok.Outputs[0].Subject != "test.out" ||
		ok.Outputs[0].MsgID != "jetfn:fn:test.out:hello" || ok.Outputs[0].Seq == 0 || ok.Subject != "test.in" || ok.NumDelivered != 1 {
		t.Errorf("hello's run %+v, want ack with its test.out output", ok)
	}
	if poison.Outcome != "dead_letter" || !strings.Contains(poison.Error, "poisoned") || len(poison.Outputs) != 0 {
		t.Errorf("poison's run %+v, want a dead letter with its error and no output", poison)
	}
}

// gatherRuns asks every instance's runs endpoint and collects the replies
// that arrive within half a second.
func gatherRuns(t *testing.T, nc *nats.Conn, q wire.RunsRequest) []wire.RunsReply {
	t.Helper()
	body, _ := json.Marshal(q)
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(manifest.RunsSubject("fn"), inbox, body); err != nil {
		t.Fatal(err)
	}
	var out []wire.RunsReply
	for {
		msg, err := sub.NextMsg(500 * time.Millisecond)
		if err != nil {
			return out
		}
		var r wire.RunsReply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			t.Fatalf("runs reply %s: %v", msg.Data, err)
		}
		out = append(out, r)
	}
}
