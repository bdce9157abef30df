package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
)

// publishTimeout bounds one publish. jetstream.Publish waits for the PubAck
// until ctx is done, and a handler's ctx lives as long as the manifest's
// timeout: a PubAck lost in a NATS restart would hold the handler, and
// through its heartbeat the message, that long (seen in the crash harness:
// two minutes). Failing lets the runtime nak and retry, which the message ID
// makes safe.
const publishTimeout = 5 * time.Second

// publishAcked publishes and waits for the stream's acknowledgement. A
// duplicate inside the window is acknowledged too (and dropped by the
// stream), so a retried publish succeeds without storing a second message.
// header may be nil.
func publishAcked(ctx context.Context, js jetstream.JetStream, subject string, data []byte, msgID string,
	header nats.Header) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: header}, opts...)
	if err != nil {
		return nil, fmt.Errorf("publishing to %s: %w", subject, err)
	}
	return ack, nil
}

// outputPublisher is the Publisher a function gets: it refuses subjects
// outside the function's declared outputs, scopes every message ID with
// jetfn.OutputMsgID, and counts the outputs the stream dropped as duplicates.
type outputPublisher struct {
	js       jetstream.JetStream
	function string
	outputs  []string
	stats    *counters
	log      *slog.Logger
	// tracer starts each output's producer span; nil when tracing is off.
	tracer trace.Tracer
}

var _ jetfn.Publisher = outputPublisher{}

func (p outputPublisher) Publish(ctx context.Context, subject string, data []byte, key string) error {
	if !manifest.CoveredByAny(subject, p.outputs) {
		return jetfn.Permanent(fmt.Errorf("%w: function %s publishes only to %v (manifest outputs), not %s",
			jetfn.ErrUndeclaredOutput, p.function, p.outputs, subject))
	}
	msgID, err := jetfn.OutputMsgID(p.function, subject, key)
	if err != nil {
		return err
	}
	header, span := startSend(ctx, p.tracer, subject, msgID, len(data))
	ack, err := publishAcked(ctx, p.js, subject, data, msgID, header)
	endSend(span, ack, err)
	if err != nil || !ack.Duplicate {
		return err
	}
	p.stats.duplicateOutputs.Add(1)
	// A redelivery's output is expected to be a duplicate; a first
	// delivery's is not: another message with the same key, or a publisher
	// that reused a jetfn ID, got there first.
	if numDelivered(ctx) == 1 {
		p.log.Warn("output of a first delivery was a duplicate; the stream kept the earlier message with this ID",
			"subject", subject, "msg_id", msgID)
	}
	return nil
}

// deliveryKey carries the delivery count of the message a handler runs for,
// so the Publisher can tell a first delivery's output from a retry's.
type deliveryKey struct{}

// numDelivered is 0 outside a handler run.
func numDelivered(ctx context.Context) uint64 {
	n, _ := ctx.Value(deliveryKey{}).(uint64)
	return n
}
