package dlq

import (
	"testing"

	"github.com/jetfn/jetfn/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestReplayKeepsTraceContext: a replay carries the original's
// traceparent and tracestate (which the dead letter copied), so the
// function's run of the replay continues the publisher's trace, while the
// runtime's headers and the dead letter's own message ID are dropped.
func TestReplayKeepsTraceContext(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	l := Letter{Header: nats.Header{
		"traceparent":            {parent},
		"tracestate":             {"vendor=1"},
		wire.HeaderFunction:      {"fn"},
		jetstream.MsgIDHeader:    {"fn:TEST:7"},
		wire.HeaderOriginalMsgID: {"in-1"},
	}}
	h := l.replayHeader("in-1.replay-1")
	if got := h.Get("traceparent"); got != parent {
		t.Errorf("replay traceparent %q, want the original's %q", got, parent)
	}
	if got := h.Get("tracestate"); got != "vendor=1" {
		t.Errorf("replay tracestate %q, want vendor=1", got)
	}
	if h.Get(wire.HeaderFunction) != "" || h.Get(jetstream.MsgIDHeader) != "in-1.replay-1" {
		t.Errorf("replay header %v: want the runtime's headers dropped and the replay's own ID", h)
	}
}
