package simulate

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startSession starts a simulated session's span, the root of its trace:
// the publisher's calls inject it, the runtime's consumer span for
// summarize-session is its child. Without a tracer it returns ctx and a
// no-op.
func startSession(ctx context.Context, t trace.Tracer, s callSession) (context.Context, func(error)) {
	if t == nil {
		return ctx, func(error) {}
	}
	ctx, span := t.Start(ctx, "simulate call", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("jetfn.conversation_id", s.conversationID),
		attribute.String("jetfn.session_id", s.sessionID)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
