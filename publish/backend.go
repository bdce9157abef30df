package publish

import (
	"context"
	"fmt"

	"github.com/jetfn/jetfn/events"
)

// Backend is what the backend service calls where it logs RECORDING_EVENT:
// it publishes the same log object, plus ts, to recording.<event>. With a
// no-op Client (no NATS_URL) it publishes nothing. It is safe to use from
// many goroutines.
type Backend struct {
	client *Client
}

// NewBackend returns a Backend that publishes through client.
func NewBackend(client *Client) *Backend {
	return &Backend{client: client}
}

// Enabled reports whether the Backend publishes at all.
func (b *Backend) Enabled() bool { return b.client.Enabled() }

// RecordingEvent publishes ev to recording.<event> with Nats-Msg-Id
// <recordingId>:<event>:<ts>, so a retry of the same call is dropped by the
// stream. ts is the caller's to set, once, when the event happens: a zero
// ts is refused with ErrNoTS, because a ts filled in here would change on
// every retry and make it a new event. An event breaking the contract
// (events.RecordingEventPayload) is refused, and logged, before any
// publish; so is a zero ts, even without NATS. Like every publish here it
// waits at most the Client's timeout, logs and returns its error, and
// never panics.
func (b *Backend) RecordingEvent(ctx context.Context, ev events.RecordingEvent) error {
	data, err := encodeRecordingEvent(ev)
	if err != nil {
		err = fmt.Errorf("publishing recording event %s: %w", ev.MsgID(), err)
		if b.client.log != nil {
			b.client.log.Error("refusing recording event", "msg_id", ev.MsgID(), "err", err)
		}
		return err
	}
	return b.client.publish(ctx, ev.Subject(), ev.MsgID(), bytesOf(data))
}

// encodeRecordingEvent encodes ev by its contract, which refuses a zero ts
// too; ErrNoTS says why in the publisher's terms.
func encodeRecordingEvent(ev events.RecordingEvent) ([]byte, error) {
	if ev.TS == 0 {
		return nil, ErrNoTS
	}
	return events.RecordingEventPayload.Encode(ev)
}
