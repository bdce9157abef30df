// Package tracing is jetfn's OpenTelemetry seam: W3C trace context carried
// in NATS headers (carrier.go), a tracer provider built from the standard
// OTEL_* environment variables alone (provider.go), and a slog handler that
// stamps trace_id and span_id on a traced message's log lines (log.go).
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set: FromEnv then returns a nil
// *Provider, nobody gets a tracer, and the runtime neither extracts nor
// starts a span. Inject and Extract work with whatever span a context
// carries, so a publisher with its own tracer (or none) uses them as they
// are, and so can the two ends of a remote-function request.
package tracing
