package tracing

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
)

// remote is a sampled span context as a publisher would have sent it.
func remote(t *testing.T) trace.SpanContext {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

func TestInjectExtract(t *testing.T) {
	sc := remote(t)
	tests := []struct {
		name      string
		ctx       context.Context
		header    nats.Header
		want      string // traceparent after Inject
		wantNil   bool
		wantKeeps string // a header value that must survive
	}{
		{name: "a span into no header", ctx: trace.ContextWithSpanContext(context.Background(), sc),
			want: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{name: "a span beside other headers", ctx: trace.ContextWithSpanContext(context.Background(), sc),
			header: nats.Header{"Nats-Msg-Id": {"k"}}, want: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", wantKeeps: "k"},
		{name: "no span, no header made", ctx: context.Background(), wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Inject(tt.ctx, tt.header)
			if tt.wantNil {
				if h != nil {
					t.Fatalf("Inject without a span made header %v", h)
				}
				return
			}
			if got := h.Get("traceparent"); got != tt.want {
				t.Fatalf("traceparent %q, want %q", got, tt.want)
			}
			if tt.wantKeeps != "" && h.Get("Nats-Msg-Id") != tt.wantKeeps {
				t.Errorf("Inject lost Nats-Msg-Id: %v", h)
			}
			back := trace.SpanContextFromContext(Extract(context.Background(), h))
			if !back.Equal(sc) {
				t.Errorf("Extract gave %v, want %v", back, sc)
			}
		})
	}
}

func TestExtractWithoutContext(t *testing.T) {
	ctx := context.Background()
	for _, h := range []nats.Header{nil, {"Nats-Msg-Id": {"k"}}, {"traceparent": {"garbage"}}} {
		if sc := trace.SpanContextFromContext(Extract(ctx, h)); sc.IsValid() {
			t.Errorf("Extract(%v) found span context %v", h, sc)
		}
	}
}
