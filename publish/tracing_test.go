package publish_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestPublishCarriesTraceContext: a publish made under the caller's span
// carries it in traceparent, so the function that takes the event
// continues the caller's trace; one made without a span carries none.
func TestPublishCarriesTraceContext(t *testing.T) {
	ns, s := recordingServer(t)
	b := newBackend(t, ns.ClientURL(), nil)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	tests := []struct {
		name string
		ctx  context.Context
		ts   int64
		want string
	}{
		{name: "under a span", ctx: traced, ts: 1_760_000_000_000, want: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{name: "without one", ctx: context.Background(), ts: 1_760_000_000_001, want: ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.RecordingEvent(tt.ctx, stopped(tt.ts)); err != nil {
				t.Fatal(err)
			}
			m, err := s.GetMsg(context.Background(), uint64(i+1))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Header.Get("traceparent"); got != tt.want {
				t.Errorf("traceparent %q, want %q", got, tt.want)
			}
		})
	}
}
