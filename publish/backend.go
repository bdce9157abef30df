package publish

import (
	"context"
	"fmt"
	"time"

	"github.com/jetfn/jetfn/events"
)

// Backend is what the backend service calls where it logs RECORDING_EVENT:
// it publishes the same log object, plus ts, to recording.<event>. With a
// no-op Client (no NATS_URL) it publishes nothing. It is safe to use from
// many goroutines.
type Backend struct {
	client *Client
	now    func() time.Time
}

// NewBackend returns a Backend that publishes through client.
func NewBackend(client *Client) *Backend {
	return &Backend{client: client, now: time.Now}
}

// Enabled reports whether the Backend publishes at all.
func (b *Backend) Enabled() bool { return b.client.Enabled() }

// RecordingEvent publishes ev to recording.<event> with Nats-Msg-Id
// <recordingId>:<event>:<ts>, so a retry of the same call is dropped by the
// stream. A zero ts is set to now (epoch ms); the caller should set it
// itself when it retries, or the retry is a new event. An event breaking
// the contract (events.RecordingEventPayload) is refused, and logged,
// before any publish. Like every publish here it waits at most the
// Client's timeout, logs and returns its error, and never panics.
func (b *Backend) RecordingEvent(ctx context.Context, ev events.RecordingEvent) error {
	if ev.TS == 0 {
		ev.TS = b.now().UnixMilli()
	}
	data, err := events.RecordingEventPayload.Encode(ev)
	if err != nil {
		err = fmt.Errorf("publishing recording event %s: %w", ev.MsgID(), err)
		if b.client.log != nil {
			b.client.log.Error("refusing recording event", "msg_id", ev.MsgID(), "err", err)
		}
		return err
	}
	return b.client.publish(ctx, ev.Subject(), ev.MsgID(), bytesOf(data))
}
