package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/tracing"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// tracedEnv is a test environment whose runtime traces into memory.
type tracedEnv struct {
	*testEnv
	spans *tracetest.InMemoryExporter
	tp    *sdktrace.TracerProvider
}

func newTracedEnv(t *testing.T) *tracedEnv {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tracedEnv{testEnv: newEnv(t), spans: spans, tp: tp}
}

// publishTraced publishes data to subject under a producer span of the
// test's own, as an instrumented publisher would, and returns that span's
// context.
func (e *tracedEnv) publishTraced(subject, data, msgID string) trace.SpanContext {
	e.t.Helper()
	ctx, span := e.tp.Tracer("test-publisher").Start(context.Background(), "send "+subject,
		trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	msg := &nats.Msg{Subject: subject, Data: []byte(data), Header: tracing.Inject(ctx, nil)}
	if _, err := e.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID)); err != nil {
		e.t.Fatal(err)
	}
	return span.SpanContext()
}

// spansNamed waits until n spans called name were exported and returns them.
func (e *tracedEnv) spansNamed(name string, n int) []tracetest.SpanStub {
	e.t.Helper()
	var got []tracetest.SpanStub
	runtimetest.Eventually(e.t, 20*time.Second, "spans named "+name, func() bool {
		got = got[:0]
		for _, s := range e.spans.GetSpans() {
			if s.Name == name {
				got = append(got, s)
			}
		}
		return len(got) >= n
	})
	return got
}

// startWithOutput runs "fn" with outputs on test.out, tracing into e; the
// handler is built from the function's Deps.
func (e *tracedEnv) startWithOutput(spec string, handler func(jetfn.Deps) jetfn.Handler) {
	e.t.Helper()
	m := testManifest(e.t, spec+"    outputs:\n      - subject: test.out\n        stream: TEST\n")
	fns := []jetfn.Function{{Name: "fn", New: func(d jetfn.Deps) (jetfn.Handler, error) { return handler(d), nil }}}
	rt, err := New(e.nc, m, fns, WithLogger(testLogger()), WithTracerProvider(e.tp))
	if err != nil {
		e.t.Fatal(err)
	}
	e.run(rt)
}

// TestTracingSpans: a message that fails once and then succeeds makes two
// consumer spans in the publisher's trace, children of its span, with the
// messaging attributes; the handler's context carries the run's span; the
// output gets a producer span under the successful run, and its
// traceparent names that span in the same trace.
func TestTracingSpans(t *testing.T) {
	env := newTracedEnv(t)
	var mu sync.Mutex
	var handlerSpans []trace.SpanContext
	env.startWithOutput("    backoff: [10ms]\n", func(d jetfn.Deps) jetfn.Handler {
		return jetfn.HandlerFunc(func(ctx context.Context, msg jetfn.Msg) error {
			mu.Lock()
			handlerSpans = append(handlerSpans, trace.SpanContextFromContext(ctx))
			mu.Unlock()
			if msg.NumDelivered == 1 {
				return errors.New("first delivery fails")
			}
			return d.Publisher.Publish(ctx, "test.out", []byte("done"), "out-1")
		})
	})
	published := env.publishTraced("test.in", "hello", "in-1")

	runs := env.spansNamed("process test.in", 2)
	send := env.spansNamed("send test.out", 1)[0]
	for i, run := range runs {
		if run.SpanContext.TraceID() != published.TraceID() || run.Parent.SpanID() != published.SpanID() {
			t.Errorf("run %d: trace %s parent %s, want a child of the publish %s/%s", i+1,
				run.SpanContext.TraceID(), run.Parent.SpanID(), published.TraceID(), published.SpanID())
		}
		if run.SpanKind != trace.SpanKindConsumer {
			t.Errorf("run %d: kind %s, want consumer", i+1, run.SpanKind)
		}
		want := map[attribute.Key]attribute.Value{
			"messaging.system":              attribute.StringValue("nats"),
			"messaging.operation.type":      attribute.StringValue("process"),
			"messaging.destination.name":    attribute.StringValue("test.in"),
			"messaging.consumer.group.name": attribute.StringValue("fn"),
			"messaging.message.id":          attribute.StringValue("in-1"),
			"messaging.message.body.size":   attribute.IntValue(5),
			AttrFunction:                    attribute.StringValue("fn"),
			AttrStream:                      attribute.StringValue("TEST"),
			AttrStreamSequence:              attribute.Int64Value(1),
			AttrNumDelivered:                attribute.Int64Value(int64(i + 1)),
			AttrOutcome:                     attribute.StringValue([]string{"retry", "ack"}[i]),
		}
		checkAttrs(t, run.Attributes, want)
	}
	if runs[0].Status.Code != codes.Error || runs[1].Status.Code == codes.Error {
		t.Errorf("statuses %v, %v; want the failed run in error and the second not", runs[0].Status, runs[1].Status)
	}
	mu.Lock()
	for i, sc := range handlerSpans {
		if sc.SpanID() != runs[i].SpanContext.SpanID() {
			t.Errorf("handler %d saw span %s, want its run's %s", i+1, sc.SpanID(), runs[i].SpanContext.SpanID())
		}
	}
	mu.Unlock()
	if send.Parent.SpanID() != runs[1].SpanContext.SpanID() || send.SpanKind != trace.SpanKindProducer {
		t.Errorf("output span: parent %s kind %s, want a producer under the second run %s",
			send.Parent.SpanID(), send.SpanKind, runs[1].SpanContext.SpanID())
	}
	checkAttrs(t, send.Attributes, map[attribute.Key]attribute.Value{
		"messaging.destination.name": attribute.StringValue("test.out"),
		"messaging.message.id":       attribute.StringValue(jetfnOutputID(t, "test.out", "out-1")),
		AttrStream:                   attribute.StringValue("TEST"),
		AttrDuplicate:                attribute.BoolValue(false),
	})
	out := outputMessage(t, env.testEnv, "test.out")
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), out.Header))
	if got.TraceID() != published.TraceID() || got.SpanID() != send.SpanContext.SpanID() {
		t.Errorf("output traceparent %q: want trace %s span %s", out.Header.Get("traceparent"),
			published.TraceID(), send.SpanContext.SpanID())
	}
}

// TestTracingDeadLetterKeepsContext: a dead letter carries the original's
// traceparent, so a replay continues the publisher's trace.
func TestTracingDeadLetterKeepsContext(t *testing.T) {
	env := newTracedEnv(t)
	env.startWithOutput("", func(jetfn.Deps) jetfn.Handler {
		return jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { return jetfn.Permanent(errors.New("no")) })
	})
	published := env.publishTraced("test.in", "x", "in-dl")
	dl := env.deadLetters(1)[0]
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), dl.Header))
	if got.TraceID() != published.TraceID() || got.SpanID() != published.SpanID() {
		t.Errorf("dead letter traceparent %q, want the original's (trace %s span %s)",
			dl.Header.Get("traceparent"), published.TraceID(), published.SpanID())
	}
	run := env.spansNamed("process test.in", 1)[0]
	checkAttrs(t, run.Attributes, map[attribute.Key]attribute.Value{
		AttrOutcome:  attribute.StringValue("dead_letter"),
		"error.type": attribute.StringValue("permanent"),
	})
}

// TestTracingOff: without a TracerProvider the handler's context carries no
// span even when the message has a traceparent (nothing is extracted), and
// an output carries no traceparent.
func TestTracingOff(t *testing.T) {
	env := newTracedEnv(t) // for its publisher only
	handled := make(chan trace.SpanContext, 1)
	m := testManifest(t, "    outputs:\n      - subject: test.out\n        stream: TEST\n")
	fns := []jetfn.Function{{Name: "fn", New: func(d jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(ctx context.Context, _ jetfn.Msg) error {
			handled <- trace.SpanContextFromContext(ctx)
			return d.Publisher.Publish(ctx, "test.out", []byte("done"), "out-off")
		}), nil
	}}}
	rt, err := New(env.nc, m, fns, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	env.publishTraced("test.in", "x", "in-off")
	if sc := <-handled; sc.IsValid() {
		t.Errorf("handler context carries span %s with tracing off", sc.SpanID())
	}
	if out := outputMessage(t, env.testEnv, "test.out"); out.Header.Get("traceparent") != "" {
		t.Errorf("output carries traceparent %q with tracing off", out.Header.Get("traceparent"))
	}
}

// TestTracingOffAllocatesNothing: the seam's cost with tracing off is a nil
// check.
func TestTracingOffAllocatesNothing(t *testing.T) {
	var rt *runTracer
	var run runContext
	run.reset(context.Background(), time.Time{}, 1)
	msg := jetfn.Msg{Subject: "test.in", Header: jetfn.Header{"traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}
	allocs := testing.AllocsPerRun(100, func() {
		span := rt.startRun(&run, msg)
		rt.endRun(span, msg, nil)
		h, s := startSend(&run, nil, "test.out", "id", 1)
		endSend(s, nil, nil)
		_ = h
		_ = rt.runLogAttrs(msg)
	})
	if allocs != 0 {
		t.Errorf("tracing off allocates %.1f times per run, want 0", allocs)
	}
}

func checkAttrs(t *testing.T, got []attribute.KeyValue, want map[attribute.Key]attribute.Value) {
	t.Helper()
	have := map[attribute.Key]attribute.Value{}
	for _, kv := range got {
		have[kv.Key] = kv.Value
	}
	for k, v := range want {
		if h, ok := have[k]; !ok || h != v {
			t.Errorf("attribute %s = %v, want %v", k, h.Emit(), v.Emit())
		}
	}
}

func jetfnOutputID(t *testing.T, subject, key string) string {
	t.Helper()
	id, err := jetfn.OutputMsgID("fn", subject, key)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// outputMessage waits for the first message on subject in TEST.
func outputMessage(t *testing.T, env *testEnv, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	var out *jetstream.RawStreamMsg
	runtimetest.Eventually(t, 20*time.Second, "an output on "+subject, func() bool {
		for _, m := range runtimetest.StreamMessages(t, env.js, "TEST") {
			if m.Subject == subject {
				out = m
				return true
			}
		}
		return false
	})
	return out
}
