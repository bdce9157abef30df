package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/test/testkit"
)

// carelessName is the careless-publisher row's name, and its --only key.
const carelessName = "careless-publisher"

// Careless is the careless-publisher row: a transcriber that publishes
// transcription.session-ended with the summary key <conversationId>:<sessionId>
// as its Nats-Msg-Id, the ID summarize-session gives its transcript.processed.
// TRANSCRIPTION stores both subjects and remembers message IDs per stream,
// so an output ID that is not scoped to the function and subject collides
// with the input's, and the stream drops the notification as a duplicate.
//
// Nothing is killed: the collision loses the notification on the first and
// only delivery, so a kill would add only an ackWait per run. It would also
// not be judged: at the after-notify point the kill check wants the
// notification stored, which is exactly what the collision prevents. The
// crash path with the same output ID is the after-notify row's.
type Careless struct {
	// Runs each start a child and publish Sessions sessions at once.
	Runs, Sessions int
}

// RunCareless runs c and returns its row: one "run" per session.
func (h *Harness) RunCareless(ctx context.Context, c Careless) Row {
	row := Row{Point: fmt.Sprintf("%s (%dx%d sessions)", carelessName, c.Runs, c.Sessions),
		WantSummaries: 1, WantNotifications: 1,
		Note: "session-ended carries the summary key as its Nats-Msg-Id, in the stream that stores transcript.processed"}
	for i := range c.Runs {
		start := time.Now()
		res, err := h.carelessOnce(ctx, c.Sessions)
		err = h.stopChildAfter(err)
		row.addAll(res, err)
		h.opts.Log.Info("run", "point", carelessName, "run", i+1, "sessions", len(res), "err", err,
			"took", time.Since(start).Round(time.Millisecond))
		if ctx.Err() != nil {
			break
		}
	}
	return row
}

// carelessOnce publishes n sessions the careless way to a fresh child,
// waits until the consumer has acked them all, and counts each one.
func (h *Harness) carelessOnce(ctx context.Context, n int) ([]Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second+time.Duration(maxRounds)*h.opts.Quiet)
	defer cancel()
	from, err := h.startDayRun(ctx, carelessName)
	if err != nil {
		return nil, err
	}
	ss := make([]session, n)
	now := time.Now().UnixNano()
	for i := range ss {
		ss[i] = session{conversationID: fmt.Sprintf("conv-%03d", h.runs),
			sessionID: fmt.Sprintf("careless-%03d-%d-%d", h.runs, now, i), segments: segmentsPerSession}
	}
	last, err := h.publishCareless(ctx, ss)
	if err != nil {
		return nil, err
	}
	if err := h.awaitAcked(ctx, last); err != nil {
		return h.carelessResults(ss, from), err
	}
	return h.carelessResults(ss, from), nil
}

// publishCareless seeds every session and publishes its session-ended with
// the summary key as message ID; it returns the last stream sequence.
func (h *Harness) publishCareless(ctx context.Context, ss []session) (uint64, error) {
	db := h.stack.DB(h.db)
	var last uint64
	for _, s := range ss {
		if err := seed(ctx, db, s); err != nil {
			return 0, err
		}
		data, err := json.Marshal(events.SessionEnded{
			ConversationID: s.conversationID, SessionID: s.sessionID, PublishedSegments: s.segments,
		})
		if err != nil {
			return 0, err
		}
		ack, err := h.stack.js.Publish(ctx, events.SessionEndedSubject, data, jetstream.WithMsgID(s.key()))
		if err != nil {
			return 0, fmt.Errorf("publishing session-ended of %s: %w", s.key(), err)
		}
		last = ack.Sequence
	}
	return last, nil
}

// awaitAcked waits until the consumer's ack floor has passed stream
// sequence last with nothing ack-pending: every session was handled and
// acked. It does not wait for notifications, which the collision drops.
func (h *Harness) awaitAcked(ctx context.Context, last uint64) error {
	return testkit.Poll(ctx, 20*time.Millisecond, fmt.Sprintf("the ack of stream sequence %d", last), func(ctx context.Context) bool {
		info, err := consumerInfo(ctx, h.stack.js)
		return err == nil && info.AckFloor.Stream >= last && info.NumAckPending == 0
	})
}

// carelessResults counts each session's summaries and notifications; a
// count that cannot be read stays zero and is reported as such.
func (h *Harness) carelessResults(ss []session, from uint64) []Result {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := make([]Result, len(ss))
	for i, s := range ss {
		sum, notes, err := h.count(ctx, s, from)
		res[i] = Result{Summaries: sum, Notifications: notes, Err: err}
	}
	return res
}
