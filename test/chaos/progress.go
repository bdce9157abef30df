package chaos

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jetfn/jetfn/events"
)

// handledSince reports whether the newest transcript.processed in the
// stream was stored after at for a session first published after at: the
// whole path (publish, stream, consumer, jetfn, Mongo, publish) works now,
// not just a backlog draining.
func (h *Harness) handledSince(ctx context.Context, at time.Time) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, transcriptionStream)
	if err != nil {
		return false
	}
	m, err := s.GetLastMsgForSubject(ctx, events.TranscriptProcessedSubject)
	if err != nil || m.Time.Before(at) {
		return false
	}
	var evt events.TranscriptProcessed
	if json.Unmarshal(m.Data, &evt) != nil {
		return false
	}
	first, ok := h.pub.FirstAttempt(events.SummaryKey(evt.ConversationID, evt.SessionID))
	return ok && first.After(at)
}
