package tracing

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is service.name when neither OTEL_SERVICE_NAME nor
// OTEL_RESOURCE_ATTRIBUTES names one.
const DefaultServiceName = "jetfn"

// Provider is the tracer provider FromEnv built. A nil *Provider is
// tracing off; its methods are safe to call.
type Provider struct {
	sdk *sdktrace.TracerProvider
}

// Enabled reports whether an OTLP endpoint is configured: the generic
// OTEL_EXPORTER_OTLP_ENDPOINT or the traces-only one. Without one, tracing
// is off and costs nothing.
func Enabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv builds a tracer provider from the OTEL_* environment variables,
// or returns nil when no endpoint is set. The exporters read the endpoint,
// headers, timeout, compression and TLS variables themselves, the SDK reads
// OTEL_TRACES_SAMPLER(_ARG) and OTEL_BSP_*, and the resource reads
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; this function only picks
// the exporter that OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL names.
// serviceVersion becomes service.version.
func FromEnv(ctx context.Context, serviceVersion string) (*Provider, error) {
	if !Enabled() {
		return nil, nil
	}
	exp, err := newExporter(ctx, protocolSetting())
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName), semconv.ServiceVersion(serviceVersion)),
		resource.WithFromEnv(), // after the defaults: OTEL_SERVICE_NAME wins
		resource.WithTelemetrySDK(),
		resource.WithHost())
	if err != nil {
		return nil, fmt.Errorf("tracing: describing the resource: %w", err)
	}
	return &Provider{sdk: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// Protocol is the OTLP protocol FromEnv uses: the traces one, the generic
// one, or the specification's default, http/protobuf.
func Protocol() string { return protocolSetting().value }

// setting is an environment variable's name and value, so an error can
// name the variable the operator set.
type setting struct{ name, value string }

func protocolSetting() setting {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := os.Getenv(name); v != "" {
			return setting{name, v}
		}
	}
	return setting{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}
}

// newExporter makes the OTLP exporter for the protocol. It does not dial:
// the gRPC connection and HTTP requests happen on the first export.
func newExporter(ctx context.Context, proto setting) (sdktrace.SpanExporter, error) {
	switch proto.value {
	case "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w: %s %q (want http/protobuf or grpc)", ErrProtocol, proto.name, proto.value)
	}
}

// TracerProvider is the provider to hand to the runtime and publishers;
// nil when tracing is off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.sdk
}

// Shutdown exports the spans still batched and stops the exporter; call it
// after the runtime has drained, so the last runs' spans are sent.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing spans: %w", err)
	}
	return nil
}
