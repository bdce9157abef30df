package bench

// The trace workload: what OpenTelemetry tracing costs. Both variants run
// jetfn on the no-op function at traceConcurrency with traceSize payloads;
// the baseline has tracing off (no endpoint set, as in production by
// default), the other turns it on through the OTEL_* variables alone and
// exports every run's span (the messages carry no traceparent, so each is
// a sampled root) over OTLP/HTTP to a sink in the parent that reads and
// discards each batch.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/internal/tracing"
	"github.com/jetfn/jetfn/runtime"
)

// WorkloadTrace: jetfn's no-op function with tracing off against on
// (Config.Trace).
const WorkloadTrace = "trace"

// variantTraced is jetfn with tracing on; the trace case's baseline is
// variantJetfn, tracing off.
const variantTraced = "jetfn-traced"

// The trace case's shape: the no-op grid's middle row.
const (
	traceConcurrency = 16
	traceSize        = 128
)

func traceCase() caseKey {
	return caseKey{workload: WorkloadTrace, concurrency: traceConcurrency, size: traceSize}
}

// traceSink is the OTLP/HTTP endpoint the traced children export to.
type traceSink struct {
	srv      *http.Server
	url      string
	requests atomic.Int64
}

// startTraceSink listens on a free local port. Each export is read in full
// (the exporter's work is the cost measured) and answered with an empty
// ExportTraceServiceResponse, which is an empty protobuf body.
func startTraceSink() (*traceSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("trace sink: %w", err)
	}
	s := &traceSink{url: "http://" + l.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *traceSink) stop() { _ = s.srv.Close() }

// startTracedRuntime is the no-op runtime with tracing configured the way
// a deployer does it: OTEL_EXPORTER_OTLP_ENDPOINT, read by tracing.FromEnv.
// The returned wait flushes the provider after the runtime stopped.
func startTracedRuntime(ctx context.Context, nc *nats.Conn, spec childSpec) (func() error, error) {
	if err := os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", spec.TraceEndpoint); err != nil {
		return nil, err
	}
	tp, err := tracing.FromEnv(ctx, "bench")
	if err != nil {
		return nil, err
	}
	if tp == nil {
		return nil, fmt.Errorf("tracing stayed off with endpoint %q", spec.TraceEndpoint)
	}
	wait, err := startNoopRuntime(ctx, nc, spec, nil, runtime.WithTracerProvider(tp.TracerProvider()))
	if err != nil {
		return nil, err
	}
	return func() error {
		err := wait()
		flush, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if ferr := tp.Shutdown(flush); err == nil {
			err = ferr
		}
		return err
	}, nil
}
