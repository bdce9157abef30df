package runtime

// OpenTelemetry in the executor: a consumer span for every handler run
// and a producer span for every output, both only when a TracerProvider
// was given (WithTracerProvider). Without one the binding's runTracer and
// the Publisher's are nil, and a run costs one nil check: no extraction,
// no span, no allocation.

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/tracing"
	"github.com/jetfn/jetfn/manifest"
)

// TracerName is the instrumentation scope of the runtime's spans.
const TracerName = "github.com/jetfn/jetfn/runtime"

// Attributes of jetfn's own, beside the messaging semantic conventions.
const (
	AttrFunction       = attribute.Key("jetfn.function")
	AttrStream         = attribute.Key("jetfn.stream")
	AttrStreamSequence = attribute.Key("jetfn.stream_sequence")
	AttrNumDelivered   = attribute.Key("jetfn.num_delivered")
	// AttrOutcome is what the handler's result decided: ack, retry or
	// dead_letter (see jetfn.Handler).
	AttrOutcome = attribute.Key("jetfn.outcome")
	// AttrDuplicate marks an output the stream dropped as a duplicate.
	AttrDuplicate = attribute.Key("jetfn.duplicate")
)

// messagingNATS is messaging.system; the conventions list no NATS value,
// and "nats" is what the other NATS instrumentations send.
var messagingNATS = semconv.MessagingSystemKey.String("nats")

// WithTracerProvider turns tracing on: every handler run gets a consumer
// span, a child of the trace context its message carries (a redelivery is
// a new span in the same trace), the handler's context carries it, and
// every output the function publishes gets a producer span whose
// traceparent the output carries. Without this option nothing is traced.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		if tp == nil {
			return errors.New("WithTracerProvider: nil provider")
		}
		o.tracer = tp.Tracer(TracerName)
		return nil
	}
}

// runTracer starts the consumer spans of one function's runs. The span's
// name and start options (its kind and the function's fixed attributes)
// are built once per binding, so a run the sampler drops costs no
// allocation for them.
type runTracer struct {
	tracer trace.Tracer
	name   string
	start  []trace.SpanStartOption
	spec   *manifest.FunctionSpec
}

// newRunTracer is nil when tracing is off.
func newRunTracer(t trace.Tracer, spec *manifest.FunctionSpec) *runTracer {
	if t == nil {
		return nil
	}
	subjects := strings.Join(spec.FilterSubjects(), ",")
	return &runTracer{tracer: t, spec: spec,
		// The conventions want a low-cardinality name: the consumer's
		// filter, not the subject of each message.
		name: "process " + subjects,
		start: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			messagingNATS,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationTemplate(subjects),
			semconv.MessagingConsumerGroupName(spec.Durable),
			AttrFunction.String(spec.Name),
		)}}
}

// startRun extracts the message's trace context and starts the run's
// consumer span, which run then carries to the handler. It returns nil
// when tracing is off.
func (rt *runTracer) startRun(run *runContext, msg jetfn.Msg) trace.Span {
	if rt == nil {
		return nil
	}
	parent := tracing.Extract(context.Background(), nats.Header(msg.Header))
	ctx, span := rt.tracer.Start(parent, rt.name, rt.start...)
	run.traced = ctx
	if span.IsRecording() { // the message's own attributes only for a sampled run
		span.SetAttributes(
			semconv.MessagingDestinationName(msg.Subject),
			semconv.MessagingMessageBodySize(len(msg.Data)),
			AttrStream.String(msg.Stream),
			AttrStreamSequence.Int64(int64(msg.StreamSequence)),
			AttrNumDelivered.Int64(int64(msg.NumDelivered)))
		if id := nats.Header(msg.Header).Get(jetstream.MsgIDHeader); id != "" {
			span.SetAttributes(semconv.MessagingMessageID(id))
		}
	}
	return span
}

// endRun records the handler's result on span and ends it; a nil span
// (tracing off) is left alone.
func (rt *runTracer) endRun(span trace.Span, msg jetfn.Msg, err error) {
	if span == nil {
		return
	}
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrOutcome.String(decide(err, msg.NumDelivered, rt.spec).kind.String()))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
	}
}

// errorType is error.type: the class of a handler's error, from the
// contract's helpers, never its message.
func errorType(err error) string {
	switch {
	case errors.Is(err, jetfn.ErrMalformed):
		return "malformed"
	case errors.Is(err, jetfn.ErrPermanent):
		return "permanent"
	default:
		return "_OTHER"
	}
}

func (k outcomeKind) String() string {
	switch k {
	case outcomeAck:
		return "ack"
	case outcomeRetry:
		return "retry"
	default:
		return "dead_letter"
	}
}

// startSend starts an output's producer span, a child of the handler's
// run, and returns the header that carries it; nil, nil when tracing is
// off.
func startSend(ctx context.Context, t trace.Tracer, subject, msgID string, size int) (nats.Header, trace.Span) {
	if t == nil {
		return nil, nil
	}
	ctx, span := t.Start(ctx, "send "+subject, producer)
	if span.IsRecording() {
		span.SetAttributes(
			messagingNATS,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(subject),
			semconv.MessagingMessageID(msgID),
			semconv.MessagingMessageBodySize(size))
	}
	// Unsampled, the output still carries the context, and with it the
	// decision not to sample, to whatever reads it next.
	return tracing.Inject(ctx, nats.Header{}), span
}

// producer is the output spans' kind, boxed once.
var producer = trace.WithSpanKind(trace.SpanKindProducer)

// endSend records where the output was stored, or why not, and ends span.
func endSend(span trace.Span, ack *jetstream.PubAck, err error) {
	if span == nil {
		return
	}
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeOther)
	} else {
		span.SetAttributes(AttrStream.String(ack.Stream), AttrStreamSequence.Int64(int64(ack.Sequence)),
			AttrDuplicate.Bool(ack.Duplicate))
	}
}

// runLogAttrs are the trace IDs of a message for the runtime's lines about
// it (msgLog), when tracing is on; they are read from its header, as
// those lines are written without the run's context.
func (rt *runTracer) runLogAttrs(msg jetfn.Msg) []any {
	if rt == nil {
		return nil
	}
	return tracing.HeaderAttrs(msg.Header)
}
