package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// jsPublisher is the Publisher the runtime gives functions.
type jsPublisher struct {
	js jetstream.JetStream
}

var _ Publisher = jsPublisher{}

// NewPublisher returns a Publisher on js, for callers outside the runtime
// (publishers, tools) that want the same message-ID rules.
func NewPublisher(js jetstream.JetStream) Publisher { return jsPublisher{js: js} }

// publishTimeout bounds one publish. jetstream.Publish waits for the PubAck
// until ctx is done, and a handler's ctx lives as long as the manifest's
// timeout: a PubAck lost in a NATS restart would hold the handler, and
// through its heartbeat the message, that long (seen in the crash harness:
// two minutes). Failing lets the runtime nak and retry, which the message ID
// makes safe.
const publishTimeout = 5 * time.Second

// Publish waits for the stream's acknowledgement. A duplicate inside the
// window is acknowledged too (and dropped by the stream), so a retried
// publish succeeds without storing a second message.
func (p jsPublisher) Publish(ctx context.Context, subject string, data []byte, msgID string) error {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	if _, err := p.js.Publish(ctx, subject, data, opts...); err != nil {
		return fmt.Errorf("publishing to %s: %w", subject, err)
	}
	return nil
}

// outputPublisher is the Publisher a function gets: it refuses subjects
// outside the function's declared outputs.
type outputPublisher struct {
	inner    Publisher
	function string
	outputs  []string
}

func (p outputPublisher) Publish(ctx context.Context, subject string, data []byte, msgID string) error {
	if !coveredByAny(subject, p.outputs) {
		return Permanent(fmt.Errorf("%w: function %s publishes only to %v (manifest outputs), not %s",
			ErrUndeclaredOutput, p.function, p.outputs, subject))
	}
	return p.inner.Publish(ctx, subject, data, msgID)
}
