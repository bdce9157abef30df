package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestWithTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := WithTraceIDs(slog.New(slog.NewTextHandler(&buf, nil))).With("function", "fn")
	ctx := trace.ContextWithSpanContext(context.Background(), remote(t))
	log.InfoContext(ctx, "traced")
	log.Info("untraced")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	for _, want := range []string{"function=fn", "trace_id=0af7651916cd43dd8448eb211c80319c", "span_id=b7ad6b7169203331"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("traced line %q lacks %s", lines[0], want)
		}
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("untraced line %q carries a trace_id", lines[1])
	}
}

func TestHeaderAttrs(t *testing.T) {
	h := Inject(trace.ContextWithSpanContext(context.Background(), remote(t)), nil)
	got := HeaderAttrs(h)
	want := []any{"trace_id", "0af7651916cd43dd8448eb211c80319c", "parent_span_id", "b7ad6b7169203331"}
	if len(got) != len(want) {
		t.Fatalf("HeaderAttrs = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("HeaderAttrs[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if got := HeaderAttrs(map[string][]string{"Nats-Msg-Id": {"k"}}); got != nil {
		t.Errorf("HeaderAttrs without traceparent = %v, want nil", got)
	}
}
