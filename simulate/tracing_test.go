package simulate_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/simulate"
)

// TestCallTraced: with a Tracer, each simulated session is the root of one
// trace that the runtime continues: simulate call → process
// transcription.session-ended → send transcript.processed.
func TestCallTraced(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	url, db := startCallStack(t, callManifest, runtime.WithTracerProvider(tp))
	opts := simulate.DefaultCallOptions()
	opts.Segments, opts.LateSegments, opts.Tracer = 2, 0, tp.Tracer("test")
	var out bytes.Buffer
	if err := simulate.Call(context.Background(), url, db, &out, opts); err != nil {
		t.Fatalf("Call: %v\n%s", err, out.String())
	}
	byName := map[string]tracetest.SpanStub{}
	runtimetest.Eventually(t, 10*time.Second, "the session's three spans", func() bool {
		for _, s := range spans.GetSpans() {
			byName[s.Name] = s
		}
		return len(byName) >= 3
	})
	root, run, send := byName["simulate call"], byName["process transcription.session-ended"], byName["send transcript.processed"]
	if root.Parent.IsValid() {
		t.Errorf("simulate call has parent %s, want none", root.Parent.SpanID())
	}
	if run.Parent.SpanID() != root.SpanContext.SpanID() || send.Parent.SpanID() != run.SpanContext.SpanID() {
		t.Errorf("parents: run %s (want %s), send %s (want %s)", run.Parent.SpanID(), root.SpanContext.SpanID(),
			send.Parent.SpanID(), run.SpanContext.SpanID())
	}
	for _, s := range []tracetest.SpanStub{run, send} {
		if s.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("%s in trace %s, want the session's %s", s.Name, s.SpanContext.TraceID(), root.SpanContext.TraceID())
		}
	}
}
