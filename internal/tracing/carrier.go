package tracing

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderCarrier lets an OpenTelemetry propagator read and write a NATS
// header. nats.Header keys are case-sensitive, and W3C trace context uses
// lower-case names (traceparent, tracestate), which is also what
// nats-server 2.11+ looks for to start its own message tracing.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key.
func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }

// Set replaces the values of key.
func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

// Keys lists the header's keys.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// propagator is W3C trace context and baggage: what Dapr, wasmCloud and
// nats-server speak over NATS. It holds no state, so a package variable is
// no global configuration.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Inject writes the span context (and baggage) that ctx carries into h and
// returns h, or a new header when h is nil and there is something to
// write. A context without a span leaves h as it was, so an untraced
// publish sends no header it did not have.
func Inject(ctx context.Context, h nats.Header) nats.Header {
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return h
	}
	if h == nil {
		h = nats.Header{}
	}
	propagator.Inject(ctx, HeaderCarrier(h))
	return h
}

// Extract returns ctx with the remote span context (and baggage) that h
// carries, or ctx itself when h carries none.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, HeaderCarrier(h))
}
