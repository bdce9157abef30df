package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
)

// publishTimeout bounds one publish attempt. jetstream.Publish waits for
// the PubAck until ctx is done, and a handler's ctx lives as long as the
// manifest's timeout: a PubAck lost in a NATS restart would hold the
// handler, and through its heartbeat the message, that long (seen in the
// crash harness: two minutes).
const publishTimeout = 5 * time.Second

// publishRetryFor bounds how long publishAcked tries again while no stream
// answers: a Raft election after a node is SIGKILLed or paused takes up to
// the 9s maximum election timeout, plus the time to notice. Past it (or
// past the handler's ctx) the handler fails and the runtime naks; a
// message ID makes every retry safe. publishRetryWait spaces the attempts.
const (
	publishRetryFor  = 30 * time.Second
	publishRetryWait = 250 * time.Millisecond
)

// publishAcked publishes and waits for the stream's acknowledgement. A
// duplicate inside the window is acknowledged too (and dropped by the
// stream), so a retried publish succeeds without storing a second message.
//
// While the stream elects a leader, a publish gets no responders at once
// (no server subscribes to the stream's subjects), times out, or is
// refused as "duplicate message id is in process" (an earlier attempt's
// proposal not yet applied). Each of those costs a delivery if returned,
// and a few elections in a row (the chaos harness's back-to-back faults)
// used up all five of summarize-session's and dead-lettered a stored
// summary without its notification; so they are retried here for up to
// publishRetryFor, while the keeper keeps the message alive. A publish
// without a message ID is retried only on no responders, which never
// reached a stream. header may be nil.
func publishAcked(ctx context.Context, js jetstream.JetStream, subject string, data []byte, msgID string,
	header nats.Header) (*jetstream.PubAck, error) {
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := retryPublishing(ctx, func(err error) bool { return retryablePublish(err, msgID != "") },
		func() (*jetstream.PubAck, error) {
			return publishOnce(ctx, js, &nats.Msg{Subject: subject, Data: data, Header: header}, opts)
		})
	if err != nil {
		return nil, fmt.Errorf("publishing to %s: %w", subject, err)
	}
	return ack, nil
}

// retryPublishing runs attempt until it succeeds, fails in a way retry
// does not accept, ctx ends or publishRetryFor has passed, waiting
// publishRetryWait between attempts: publishAcked's and a delayed
// output's batch (delayed.go) retry alike.
func retryPublishing(ctx context.Context, retry func(error) bool, attempt func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
	giveUp := time.Now().Add(publishRetryFor)
	for {
		ack, err := attempt()
		if err == nil || !retry(err) || ctx.Err() != nil || time.Now().After(giveUp) {
			return ack, err
		}
		pause(ctx, publishRetryWait) // a cancelled ctx ends the loop on the next pass
	}
}

func publishOnce(ctx context.Context, js jetstream.JetStream, m *nats.Msg, opts []jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	return js.PublishMsg(ctx, m, opts...)
}

// errCodeMsgIDInProcess is JetStream's "duplicate message id is in process"
// (409): an attempt with this ID is proposed and not yet applied.
const errCodeMsgIDInProcess jetstream.ErrorCode = 10158

// retryablePublish reports whether a failed publish may succeed if tried
// again with the same message ID: nothing answered, or the answer is
// still being decided. A timeout is retried only with a message ID (the
// first attempt may have been stored).
func retryablePublish(err error, withID bool) bool {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeMsgIDInProcess {
		return true
	}
	return withID && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout))
}

// outputPublisher is the Publisher a function gets: it refuses subjects
// outside the function's declared outputs, scopes every message ID with
// jetfn.OutputMsgID, and counts the outputs the stream dropped as duplicates.
type outputPublisher struct {
	js       jetstream.JetStream
	function string
	// scope scopes the message IDs: the function's name, or the one it was
	// first created under (scope.go). Nil: the name.
	scope   *idScope
	outputs []string
	// delayed are the outputs declared delayed (delayed.go).
	delayed []string
	stats   *counters
	log     *slog.Logger
	// tracer starts each output's producer span; nil when tracing is off.
	tracer trace.Tracer
}

var _ jetfn.Publisher = outputPublisher{}

func (p outputPublisher) scopeName() string {
	if p.scope == nil {
		return p.function
	}
	return p.scope.get()
}

func (p outputPublisher) Publish(ctx context.Context, subject string, data []byte, key string) error {
	if !manifest.CoveredByAny(subject, p.outputs) {
		return jetfn.Permanent(fmt.Errorf("%w: function %s publishes only to %v (manifest outputs), not %s",
			jetfn.ErrUndeclaredOutput, p.function, p.outputs, subject))
	}
	msgID, err := jetfn.OutputMsgID(p.scopeName(), subject, key)
	if err != nil {
		return err
	}
	header, span := startSend(ctx, p.tracer, subject, msgID, len(data))
	ack, err := publishAcked(ctx, p.js, subject, data, msgID, header)
	endSend(span, ack, err)
	if err == nil {
		noteOutput(ctx, subject, msgID, len(data), ack) // console: recent runs
	}
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
