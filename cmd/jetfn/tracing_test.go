package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/internal/tracing"
	"github.com/jetfn/jetfn/internal/tracing/tracingtest"
	"github.com/jetfn/jetfn/publish"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestTracingOneSessionOneTrace is the black-box check: the built
// binary, configured by OTEL_* alone, exports over OTLP/HTTP to a receiver
// this test runs. One session published under the test's own span (its
// traceparent injected by package publish) goes through summarize-session
// to transcript.processed in that one trace: the function's consumer span
// is the publish span's child, the output's producer span is the
// consumer's, and the output's traceparent carries the input's trace ID.
// The batch delay is ten minutes, so the spans arrive only because the
// SIGTERM shutdown flushes them. The function's log line carries the IDs.
func TestTracingOneSessionOneTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	recv := tracingtest.StartHTTP(t)
	var logs runtimetest.LogBuffer
	dev := startDevWith(t, buildJetfn(t), filepath.Join(t.TempDir(), ".jetfn"), freePort(t), freePort(t),
		[]string{"LOG_LEVEL=info", "OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_TRACES_SAMPLER=parentbased_always_on", "OTEL_SERVICE_NAME=",
			"OTEL_BSP_SCHEDULE_DELAY=600000"}, &logs)
	processed := subscribeProcessed(t, dev.natsURL)

	publisher := publishSpan(t)
	publishSession(t, dev, trace.ContextWithSpanContext(context.Background(), publisher))
	var out *nats.Msg
	select {
	case out = <-processed:
	case <-time.After(60 * time.Second):
		t.Fatal("no transcript.processed within 60s")
	}
	outCtx := trace.SpanContextFromContext(tracing.Extract(context.Background(), out.Header))
	if outCtx.TraceID() != publisher.TraceID() {
		t.Errorf("transcript.processed traceparent %q: trace %s, want the input's %s",
			out.Header.Get("traceparent"), outCtx.TraceID(), publisher.TraceID())
	}
	if code, _ := dev.stop(t); code != 0 {
		t.Fatalf("jetfn dev exited %d after SIGTERM", code)
	}

	run := receivedSpan(t, recv, "process transcription.session-ended", publisher.TraceID().String())
	send := receivedSpan(t, recv, "send transcript.processed", publisher.TraceID().String())
	if run.ParentSpanID() != publisher.SpanID().String() {
		t.Errorf("consumer span's parent %s, want the publish span %s", run.ParentSpanID(), publisher.SpanID())
	}
	if send.ParentSpanID() != run.SpanID() || send.SpanID() != outCtx.SpanID().String() {
		t.Errorf("producer span %s (parent %s); want a child of the run %s, named by the output's traceparent %s",
			send.SpanID(), send.ParentSpanID(), run.SpanID(), outCtx.SpanID())
	}
	for key, want := range map[string]string{
		"messaging.system": "nats", "messaging.destination.name": events.SessionEndedSubject,
		"messaging.message.id": events.SessionEndedKey("c-trace", "s-trace"), "jetfn.function": "summarize-session",
		"jetfn.stream": "TRANSCRIPTION", "jetfn.num_delivered": "1", "jetfn.outcome": "ack",
	} {
		if got := run.Attr(key); got != want {
			t.Errorf("consumer span %s = %q, want %q", key, got, want)
		}
	}
	if run.Service != "jetfn" {
		t.Errorf("service.name %q, want the default jetfn", run.Service)
	}
	summarized := lineWith(logs.String(), "session summarized")
	if !strings.Contains(summarized, "trace_id="+publisher.TraceID().String()) || !strings.Contains(summarized, "span_id="+run.SpanID()) {
		t.Errorf("the function's log line lacks its run's trace_id and span_id: %q", summarized)
	}
}

// publishSpan is the span context of an instrumented transcriber: sampled,
// so the binary's parent-based sampler records the rest of the trace.
func publishSpan(t *testing.T) trace.SpanContext {
	t.Helper()
	tid, err := trace.TraceIDFromHex("5b8efff798038103d269b633813fc60c")
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex("eee19b7ec3c1b174")
	if err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// publishSession saves and publishes two segments and session-ended
// through package publish, under ctx's span.
func publishSession(t *testing.T, dev *devProcess, ctx context.Context) {
	t.Helper()
	mongoURI := strings.TrimPrefix(printedLine(t, dev, "MONGO_URI="), "MONGO_URI=")
	client, err := publish.Connect(dev.natsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	tr, err := publish.NewTranscriber(client, runtimetest.ConnectMongo(t, mongoURI).Database("jetfn"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		seg := events.Segment{ConversationID: "c-trace", SessionID: "s-trace", Index: i, Speaker: "Ana",
			Text: "Can you hear me?", StartMs: int64(i) * 1000, EndMs: int64(i)*1000 + 900}
		if err := tr.SaveSegment(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.SessionEnded(ctx, "c-trace", "s-trace", 2); err != nil {
		t.Fatal(err)
	}
}

// subscribeProcessed delivers every transcript.processed, headers and all.
func subscribeProcessed(t *testing.T, url string) <-chan *nats.Msg {
	t.Helper()
	ch := make(chan *nats.Msg, 16)
	if _, err := runtimetest.Connect(t, url).ChanSubscribe(events.TranscriptProcessedSubject, ch); err != nil {
		t.Fatal(err)
	}
	return ch
}

// receivedSpan waits for the span called name in trace traceID.
func receivedSpan(t *testing.T, recv *tracingtest.Receiver, name, traceID string) tracingtest.Span {
	t.Helper()
	var found tracingtest.Span
	runtimetest.Eventually(t, 10*time.Second, "span "+name+" at the receiver", func() bool {
		for _, s := range recv.Spans() {
			if s.Name == name && s.TraceID() == traceID {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// lineWith is the first line of logs containing s, or "".
func lineWith(logs, s string) string {
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
