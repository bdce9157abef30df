package tracing_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/internal/tracing"
	"github.com/jetfn/jetfn/internal/tracing/tracingtest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// clearOTLPEnv unsets every variable FromEnv or the exporters read, so the
// machine's own settings cannot leak into a test.
func clearOTLPEnv(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME",
		"OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(k, "")
	}
}

func TestFromEnvOffWithoutEndpoint(t *testing.T) {
	clearOTLPEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc") // a protocol alone turns nothing on
	p, err := tracing.FromEnv(context.Background(), "v0")
	if err != nil || p != nil {
		t.Fatalf("FromEnv = %v, %v; want nil, nil (off)", p, err)
	}
	if p.TracerProvider() != nil || p.Shutdown(context.Background()) != nil {
		t.Error("a nil Provider should give no tracer provider and shut down cleanly")
	}
}

func TestFromEnvRefusesUnknownProtocol(t *testing.T) {
	clearOTLPEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json") // the traces one wins
	_, err := tracing.FromEnv(context.Background(), "v0")
	if !errors.Is(err, tracing.ErrProtocol) || !strings.Contains(err.Error(), `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL "http/json"`) {
		t.Fatalf("FromEnv with http/json: %v, want ErrProtocol naming the variable and its value", err)
	}
}

// TestFromEnvExports: with an endpoint set, each protocol exports to a real
// receiver, Shutdown flushes what the batcher holds, and the resource
// names the service (jetfn by default, OTEL_SERVICE_NAME when set).
func TestFromEnvExports(t *testing.T) {
	tests := []struct {
		name, protocol, endpointVar, service, wantService string
		start                                             func(testing.TB) *tracingtest.Receiver
	}{
		{name: "http/protobuf by default", endpointVar: "OTEL_EXPORTER_OTLP_ENDPOINT",
			start: tracingtest.StartHTTP, wantService: "jetfn"},
		{name: "grpc, named service", protocol: "grpc", endpointVar: "OTEL_EXPORTER_OTLP_ENDPOINT",
			start: tracingtest.StartGRPC, service: "summarizer", wantService: "summarizer"},
		{name: "traces endpoint, http/protobuf", protocol: "http/protobuf", endpointVar: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
			start: func(t testing.TB) *tracingtest.Receiver {
				r := tracingtest.StartHTTP(t)
				r.Endpoint += "/v1/traces" // the traces endpoint is used as given
				return r
			}, wantService: "jetfn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearOTLPEnv(t)
			recv := tt.start(t)
			t.Setenv(tt.endpointVar, recv.Endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tt.protocol)
			t.Setenv("OTEL_SERVICE_NAME", tt.service)
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000") // only Shutdown can send it
			p, err := tracing.FromEnv(context.Background(), "v1.2.3")
			if err != nil {
				t.Fatal(err)
			}
			_, span := p.TracerProvider().Tracer("test").Start(context.Background(), "one")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			runtimetest.Eventually(t, 10*time.Second, "the span at the receiver", func() bool { return len(recv.Spans()) == 1 })
			if got := recv.Spans()[0]; got.Name != "one" || got.Service != tt.wantService {
				t.Errorf("received %q from service %q, want \"one\" from %q", got.Name, got.Service, tt.wantService)
			}
		})
	}
}
