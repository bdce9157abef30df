package publishrecordingevent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
)

// Name is the function's name in manifests and in the registry.
const Name = "publish-recording-event"

// Function handles the backend's recording.<event> messages.
//
// Handle returns nil once the event is recorded and its notice published,
// and the runtime acks. A payload that breaks the contract, or arrives on
// another event's subject, is malformed: dead-lettered, never retried. An
// event whose recording belongs to another conversation is a permanent
// failure, dead-lettered too. A Mongo or publish failure is a plain error:
// the runtime naks with backoff and the next delivery runs every step
// again, which is safe because each one is idempotent.
type Function struct {
	store   store
	locks   *recordingLocks
	pub     jetfn.Publisher
	log     *slog.Logger
	handler jetfn.Handler
}

var _ jetfn.Handler = (*Function)(nil)

// New builds the function from the runtime's dependencies. It takes no
// config, and refuses a config block that sets any key.
func New(deps jetfn.Deps) (jetfn.Handler, error) {
	if err := CheckConfig(deps.Config); err != nil {
		return nil, err
	}
	if err := deps.Require("publish-recording-event", jetfn.NeedMongo|jetfn.NeedPublisher); err != nil {
		return nil, err
	}
	log := deps.Log()
	f := &Function{store: newStore(deps.Mongo), locks: newRecordingLocks(), pub: deps.Publisher, log: log}
	f.handler = events.RecordingEventPayload.Handler(f.record)
	return f, nil
}

// CheckConfig refuses every key of a config block: the function takes no
// settings, so any key is a mistake that would otherwise be ignored. New
// calls it too, so the two cannot drift.
func CheckConfig(block jetfn.Config) error {
	return block.Decode(&struct{}{})
}

// Handle decodes the event with events.RecordingEventPayload, which
// checks it, then records it.
func (f *Function) Handle(ctx context.Context, msg jetfn.Msg) error {
	return f.handler.Handle(ctx, msg)
}

// record stores the event, then publishes the notice: a crash in between
// is repaired by the redelivery, and the notice's Nats-Msg-Id makes the
// stream drop a second copy.
func (f *Function) record(ctx context.Context, msg jetfn.Msg, ev events.RecordingEvent) error {
	if want := ev.Subject(); msg.Subject != want {
		return jetfn.Malformed(fmt.Errorf("a %s event arrived on %s, want %s", ev.Event, msg.Subject, want))
	}
	unlock, err := f.locks.lock(ctx, ev.RecordingID)
	if err != nil {
		return fmt.Errorf("waiting for recording %s: %w", ev.RecordingID, err)
	}
	doc, err := f.store.record(ctx, ev, msg.Data)
	unlock()
	if err != nil {
		if errors.Is(err, ErrConversationMismatch) {
			return jetfn.Permanent(err)
		}
		return err
	}
	if err := f.publish(ctx, ev, noticeOf(ev, doc)); err != nil {
		return err
	}
	f.log.Debug("recorded recording event", "recording_id", ev.RecordingID, "event", ev.Event,
		"stream_seq", msg.StreamSequence, "num_delivered", msg.NumDelivered)
	return nil
}

func (f *Function) publish(ctx context.Context, ev events.RecordingEvent, notice events.RecordingNotice) error {
	data, err := events.RecordingNoticePayload.Encode(notice)
	if err != nil {
		return fmt.Errorf("encoding notice %s: %w", ev.MsgID(), err)
	}
	return f.pub.Publish(ctx, events.RecordingNoticeSubject(ev.ConversationID), data, ev.MsgID())
}

// noticeOf is the notice for ev, given the recording after it. A failed
// recording's notice always has a reason, as the contract requires: the
// event's own, else the deletion's.
func noticeOf(ev events.RecordingEvent, doc recordingDoc) events.RecordingNotice {
	n := events.RecordingNotice{RecordingID: ev.RecordingID, Event: ev.Event, TS: ev.TS,
		State: stateOf(doc.StateKey), Failed: doc.Failed, Reason: ev.Reason}
	if n.Failed && n.Reason == "" {
		n.Reason = doc.Reason
	}
	if n.Failed && n.Reason == "" {
		n.Reason = "deleted before it was stored"
	}
	return n
}
