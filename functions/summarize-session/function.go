package summarizesession

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
)

// Name is the function's name in manifests and in the registry.
const Name = "summarize-session"

// Function handles transcription.session-ended events.
//
// Handle returns nil once the summary is stored and transcript.processed is
// published, and the runtime acks. An event that events.SessionEndedPayload
// refuses is malformed: dead-lettered with the payload's problems as the
// reason, and never retried. A Mongo
// or publish failure, or a context cancelled during the quiet wait, is a
// plain error: the runtime naks with backoff and the next delivery starts
// again from the top, which is safe because both side effects are
// idempotent: the first summary stored for a session stays, and every run
// announces that one.
type Function struct {
	cfg     Config
	store   store
	pub     jetfn.Publisher
	log     *slog.Logger
	wait    waitFunc
	now     func() time.Time
	handler jetfn.Handler
}

var _ jetfn.Handler = (*Function)(nil)

// New builds the function from the runtime's dependencies. Its config block
// takes quiet (default 2s) and maxRounds (default 5).
func New(deps jetfn.Deps) (jetfn.Handler, error) {
	cfg, err := decodeConfig(deps.Config)
	if err != nil {
		return nil, err
	}
	if err := deps.Require("summarize-session", jetfn.NeedMongo|jetfn.NeedPublisher); err != nil {
		return nil, err
	}
	log := deps.Log()
	f := &Function{cfg: cfg, store: newStore(deps.Mongo), pub: deps.Publisher, log: log, wait: sleep, now: time.Now}
	f.handler = events.SessionEndedPayload.Handler(f.summarize)
	return f, nil
}

// Handle decodes the event and summarizes its session.
func (f *Function) Handle(ctx context.Context, msg jetfn.Msg) error {
	return f.handler.Handle(ctx, msg)
}

// summarize runs the steps in an order that can restart from the top after
// a crash anywhere: reads first, then the insert, then the publish of what
// is stored. A run that finds a summary stored already (a redelivery, the
// session ended twice) publishes that one, not its own.
func (f *Function) summarize(ctx context.Context, msg jetfn.Msg, evt events.SessionEnded) error {
	log := f.log.With("conversation_id", evt.ConversationID, "session_id", evt.SessionID,
		"stream_seq", msg.StreamSequence, "num_delivered", msg.NumDelivered)
	count := func(ctx context.Context) (int, error) { return f.store.countSegments(ctx, evt) }
	st, err := waitStable(ctx, f.cfg.Quiet, f.cfg.MaxRounds, count, f.wait)
	if err != nil {
		return err
	}
	segs, err := f.store.loadSegments(ctx, evt)
	if err != nil {
		return err
	}
	sum, err := f.store.saveSummary(ctx, buildSummary(evt, segs, f.now()))
	if err != nil {
		return err
	}
	if err := f.publishProcessed(ctx, sum); err != nil {
		return err
	}
	log.InfoContext(ctx, "session summarized", "segments", sum.Segments, "published_segments", evt.PublishedSegments,
		"complete", sum.Complete, "rounds", st.rounds, "count_stable", st.stable)
	return nil
}

// publishProcessed announces the stored summary, encoded and checked by
// its contract. The Nats-Msg-Id is the summary's key, so a repeated run
// inside the stream's duplicate window is dropped by the stream; one
// outside it announces the same summary again.
func (f *Function) publishProcessed(ctx context.Context, sum events.Summary) error {
	data, err := events.TranscriptProcessedPayload.Encode(events.TranscriptProcessed{
		ConversationID: sum.ConversationID, SessionID: sum.SessionID,
		Segments: sum.Segments, Complete: sum.Complete,
	})
	if err != nil {
		return fmt.Errorf("encoding %s: %w", events.TranscriptProcessedSubject, err)
	}
	return f.pub.Publish(ctx, events.TranscriptProcessedSubject, data, sum.ID)
}
