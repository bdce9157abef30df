package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/test/testkit"
	"github.com/jetfn/jetfn/wire"
)

// steadyKind is the row of sessions that ended before the first fault.
const steadyKind Kind = "before any fault"

// outcome is what became of one session.
type outcome struct {
	pub           Publication
	summaries     int
	notifications int
	deadLettered  bool
}

// readWithin bounds the retries of a read the report needs (Retry): the
// last fault's node may still be electing leaders or taking clients back,
// and its "no responders" must not end the run.
const readWithin = time.Minute

// classify reads every summary and notification and sorts each session
// into the row of the fault it ended under (from one fault's start to the
// next's), Jepsen-style: acknowledged sessions must have exactly one of
// each; sessions never acknowledged are unknown, whatever became of them.
// Then it checks the recording events the same way, and their order
// (checkRecordings).
func (h *Harness) classify(ctx context.Context, faults []Fault) (*Report, error) {
	var notes []testkit.Notification
	err := testkit.Retry(ctx, readWithin, "reading notifications", func(ctx context.Context) error {
		var err error
		notes, err = testkit.ScanNotifications(ctx, h.js, transcriptionStream, 1)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading notifications: %w", err)
	}
	sums, err := testkit.SummaryCounts(ctx, h.mc.Database(database))
	if err != nil {
		return nil, fmt.Errorf("reading summaries: %w", err)
	}
	perKey := map[string]int{}
	for _, n := range notes {
		perKey[n.Key]++
	}
	slices.SortFunc(notes, func(a, b testkit.Notification) int { return a.Stored.Compare(b.Stored) })
	rep := &Report{Sync: h.opts.Sync, Faults: faults, FailedStarts: h.failedStarts()}
	dead, err := h.deadLettered(ctx)
	if err != nil {
		return nil, err
	}
	rep.DeadLetters = uint64(dead.total)
	rows := map[Kind]*Row{}
	for _, p := range h.pub.Publications() {
		o := outcome{pub: p, summaries: sums[p.Key()], notifications: perKey[p.Key()], deadLettered: dead.sessions[p.Key()]}
		row := rep.row(rows, kindAt(faults, p.First))
		if err := h.count(ctx, rep, row, o); err != nil {
			return nil, err
		}
	}
	for i := range rep.Faults {
		f := &rep.Faults[i]
		until := h.pubStopped
		if i+1 < len(rep.Faults) {
			until = rep.Faults[i+1].At
		}
		measure(f, until, notes, h.pub)
		rep.row(rows, f.Kind).addFault(*f)
	}
	if err := h.checkRecordings(ctx, rep, faults, dead.events); err != nil {
		return nil, err
	}
	return rep, nil
}

// kindAt is the kind of the last fault that began at or before t.
func kindAt(faults []Fault, t time.Time) Kind {
	k := steadyKind
	for _, f := range faults {
		if !f.At.After(t) {
			k = f.Kind
		}
	}
	return k
}

// count adds one session to its row. A lost session is looked up in the
// stream: a session-ended the stream acknowledged and no longer holds is
// NATS's loss, one it holds and jetfn never finished is jetfn's.
func (h *Harness) count(ctx context.Context, rep *Report, row *Row, o outcome) error {
	row.Sessions++
	p := o.pub
	if p.Acked.IsZero() {
		row.Unknown++
		if o.summaries > 0 {
			row.UnknownHandled++
		}
		return nil
	}
	row.Acked++
	row.Retried += min(p.Attempts-1, 1)
	if o.summaries > 1 || o.notifications > 1 {
		row.Duplicates++
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s: %d summaries, %d notifications", row.Kind, p.Key(), o.summaries, o.notifications))
	}
	if (o.summaries == 0 || o.notifications == 0) && o.deadLettered {
		row.DeadLettered++
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s (ack seq %d): %d summaries, %d notifications; dead-lettered (replayable)",
			row.Kind, p.Key(), p.Seq, o.summaries, o.notifications))
		return nil
	}
	if o.summaries == 0 || o.notifications == 0 {
		row.Lost++
		where, err := h.lostWhere(ctx, p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(where, lostByNATS) {
			row.LostByNATS++
		}
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s (ack seq %d): %d summaries, %d notifications; %s",
			row.Kind, p.Key(), p.Seq, o.summaries, o.notifications, where))
	}
	return nil
}

// What lostWhere finds.
const (
	lostByNATS  = "session-ended no longer in the stream at its acknowledged sequence"
	lostByJetfn = "session-ended in the stream, jetfn never finished it"
)

func (h *Harness) lostWhere(ctx context.Context, p Publication) (string, error) {
	var m *jetstream.RawStreamMsg
	err := testkit.Retry(ctx, readWithin, "reading a lost session-ended", func(ctx context.Context) error {
		s, err := h.js.Stream(ctx, transcriptionStream)
		if err != nil {
			return err
		}
		m, err = s.GetMsg(ctx, p.Seq)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return lostByNATS, nil
	}
	if err != nil {
		return "", err
	}
	if m.Header.Get(jetstream.MsgIDHeader) != events.SessionEndedKey(p.Conversation, p.Session) {
		return lostByNATS + fmt.Sprintf(" (seq %d holds %s %q)", p.Seq, m.Subject, m.Header.Get(jetstream.MsgIDHeader)), nil
	}
	return lostByJetfn, nil
}

// deadLetters are the dead letters the run left, by function.
type deadLetters struct {
	// sessions are the summary keys of summarize-session's; events the
	// event IDs of publish-recording-event's.
	sessions, events map[string]bool
	// total counts every dead letter, of any function.
	total int
}

// deadLettered reads every dead letter (runtime.deadletter keeps the
// original payload and names the function in a header).
func (h *Harness) deadLettered(ctx context.Context) (deadLetters, error) {
	var out deadLetters
	err := testkit.Retry(ctx, readWithin, "reading dead letters", func(ctx context.Context) error {
		var err error
		out, err = h.readDeadLetters(ctx)
		return err
	})
	return out, err
}

func (h *Harness) readDeadLetters(ctx context.Context) (deadLetters, error) {
	out := deadLetters{sessions: map[string]bool{}, events: map[string]bool{}}
	err := testkit.EachStored(ctx, h.js, deadLetterStream, func(m *jetstream.RawStreamMsg) error {
		out.total++
		if m.Header.Get(wire.HeaderFunction) == recordingFunction {
			if id := recordingEventID(m.Data); id != "" {
				out.events[id] = true
			}
			return nil
		}
		var evt events.SessionEnded
		if err := json.Unmarshal(m.Data, &evt); err != nil {
			return fmt.Errorf("decoding dead letter #%d: %w", m.Sequence, err)
		}
		out.sessions[events.SummaryKey(evt.ConversationID, evt.SessionID)] = true
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("reading dead letters: %w", err)
	}
	return out, nil
}
