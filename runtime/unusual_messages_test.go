package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestStoredStatusHeaderIsHandled: a stored message with an empty body and
// a Status header is a message like any other. The puller took it for a
// pull status (a status has an empty body and a Status header too): it was
// never handled, never dead-lettered, and pinned the ack floor. A status
// has no reply subject; a stored message always has its $JS.ACK one.
func TestStoredStatusHeaderIsHandled(t *testing.T) {
	tests := []struct {
		name   string
		header nats.Header
	}{
		{name: "an idle heartbeat's", header: nats.Header{"Status": {"100"}, "Description": {"Idle Heartbeat"}}},
		{name: "an expired request's", header: nats.Header{"Status": {"408"}}},
		{name: "an expired request's with pending counts", header: nats.Header{"Status": {"408"}, "Nats-Pending-Messages": {"3"}}},
		{name: "a leadership change's", header: nats.Header{"Status": {"409"}, "Description": {"Leadership Change"}}},
		{name: "no responders'", header: nats.Header{"Status": {"503"}}},
	}
	env := newEnv(t)
	rec := &recorder{}
	env.start(testManifest(t, "    ackWait: 2s\n    backoff: [100ms]\n"), rec)
	for _, tt := range tests {
		if _, err := env.js.PublishMsg(context.Background(), &nats.Msg{Subject: "test.in", Header: tt.header}); err != nil {
			t.Fatal(err)
		}
	}
	n := uint64(len(tests))
	runtimetest.Eventually(t, 15*time.Second, "every message handled and acked", func() bool {
		return rec.count() == len(tests) && env.settled("TEST", "fn", n)
	})
	for i, d := range rec.all() {
		if want := tests[i].header.Get("Status"); d.msg.Header.Get("Status") != want || len(d.msg.Data) != 0 {
			t.Errorf("%s: handled Status %q with %d bytes, want %q and an empty body", tests[i].name,
				d.msg.Header.Get("Status"), len(d.msg.Data), want)
		}
	}
	if got := env.streamMsgs("DEADLETTER"); got != 0 {
		t.Errorf("%d dead letters, want none", got)
	}
}

// TestTabInHeaderValueIsHandled: a horizontal tab is legal in a header
// value and reaches the handler as sent; it used to make a valid message
// malformed and dead-lettered.
func TestTabInHeaderValueIsHandled(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	env.start(testManifest(t, ""), rec)
	msg := &nats.Msg{Subject: "test.in", Data: []byte(`{}`), Header: nats.Header{"X-Note": {"a\tb"}}}
	if _, err := env.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 10*time.Second, "handled and acked", func() bool {
		return env.settled("TEST", "fn", 1) && rec.count() == 1
	})
	if got := rec.all()[0].msg.Header.Get("X-Note"); got != "a\tb" {
		t.Errorf("X-Note = %q, want %q", got, "a\tb")
	}
	if got := env.streamMsgs("DEADLETTER"); got != 0 {
		t.Errorf("%d dead letters, want none", got)
	}
}
