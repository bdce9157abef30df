package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// WithTraceIDs returns a logger whose records carry trace_id and span_id
// when the context they are logged with carries a span (InfoContext and
// friends), so a log line can be found from its trace and back. Install
// it only when tracing is on: off, it would cost a context lookup per line
// for nothing.
func WithTraceIDs(l *slog.Logger) *slog.Logger {
	return slog.New(traceHandler{l.Handler()})
}

// traceHandler adds the span's IDs to each record it passes on.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}

// HeaderAttrs is trace_id and parent_span_id (the span that published the
// message) of the trace context a NATS header carries, or nil: for the
// runtime's lines about a message, which are written without the run's
// context, so they name the message's trace but not the run's span.
func HeaderAttrs(h map[string][]string) []any {
	sc := trace.SpanContextFromContext(Extract(context.Background(), h))
	if !sc.IsValid() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "parent_span_id", sc.SpanID().String()}
}
