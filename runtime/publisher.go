package runtime

import (
	"context"
	"fmt"

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

// Publish waits for the stream's acknowledgement. A duplicate inside the
// window is acknowledged too (and dropped by the stream), so a retried
// publish succeeds without storing a second message.
func (p jsPublisher) Publish(ctx context.Context, subject string, data []byte, msgID string) error {
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
