package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/test/testkit"
)

// The per-key order check of publish-recording-event: every event's
// notice must be stored in NOTIFICATIONS exactly once, and the notices of
// one recording in the order the RECORDING stream stored its events (by
// the stream sequence of each message ID's first storage).

// storedMsg is one message as a stream stored it.
type storedMsg struct {
	Seq     uint64
	Subject string
	MsgID   string
	Stored  time.Time
}

// eventVerdict is what became of one recording event.
type eventVerdict struct {
	pub RecordingPublication
	// inputSeq is the first sequence RECORDING stored the event at (0: it
	// holds none).
	inputSeq uint64
	// noticeSeq is the first sequence NOTIFICATIONS stored the event's
	// notice at (0: none); notices counts the copies it holds.
	noticeSeq    uint64
	notices      int
	deadLettered bool
	// before is the index of an event of the same recording that RECORDING
	// stored before this one but whose notice NOTIFICATIONS stored after
	// this one's (the latest-noticed such event); -1 when this one is in
	// order.
	before int
}

// judgeRecordings matches every published event with its first storage
// in RECORDING (input, in stream order), its notices in NOTIFICATIONS
// (notices, in stream order) and the dead letters (by event ID), and finds
// the events noticed out of order: walking a recording's events in
// RECORDING order, an event whose notice comes before the latest notice
// of the events stored before it.
func judgeRecordings(pubs []RecordingPublication, input, notices []storedMsg, dead map[string]bool) []eventVerdict {
	firstIn := map[string]uint64{}
	for _, m := range input {
		if _, ok := firstIn[m.MsgID]; !ok && m.MsgID != "" {
			firstIn[m.MsgID] = m.Seq
		}
	}
	firstNotice, noticeCount := map[string]uint64{}, map[string]int{}
	for _, m := range notices {
		if _, ok := firstNotice[m.MsgID]; !ok {
			firstNotice[m.MsgID] = m.Seq
		}
		noticeCount[m.MsgID]++
	}
	out := make([]eventVerdict, len(pubs))
	byRecording := map[string][]int{}
	for i, p := range pubs {
		out[i] = eventVerdict{pub: p, inputSeq: firstIn[p.ID()], noticeSeq: firstNotice[p.NoticeID()],
			notices: noticeCount[p.NoticeID()], deadLettered: dead[p.ID()], before: -1}
		if out[i].inputSeq > 0 && out[i].noticeSeq > 0 {
			byRecording[p.Event.RecordingID] = append(byRecording[p.Event.RecordingID], i)
		}
	}
	for _, idx := range byRecording {
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(out[a].inputSeq, out[b].inputSeq) })
		latest := -1 // the event stored so far whose notice came last
		for _, i := range idx {
			switch {
			case latest >= 0 && out[i].noticeSeq < out[latest].noticeSeq:
				out[i].before = latest
			default:
				latest = i
			}
		}
	}
	return out
}

// checkRecordings reads RECORDING, NOTIFICATIONS and the recording dead
// letters, judges every published event and adds it to its fault's row
// (by its first publish), with a problem line for each violation.
func (h *Harness) checkRecordings(ctx context.Context, rep *Report, faults []Fault, dead map[string]bool) error {
	var input, notices []storedMsg
	err := testkit.Retry(ctx, readWithin, "reading the recording events", func(ctx context.Context) error {
		var err error
		input, err = scanStream(ctx, h.js, recordingStream, "recording.>")
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the recording events: %w", err)
	}
	err = testkit.Retry(ctx, readWithin, "reading the recording notices", func(ctx context.Context) error {
		var err error
		notices, err = scanStream(ctx, h.js, noticeStream, events.RecordingNoticeSubject("*"))
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the recording notices: %w", err)
	}
	pubs := h.recPub.Publications()
	verdicts := judgeRecordings(pubs, input, notices, dead)
	rec := &RecordingReport{PerKey: h.perKey(), Notices: len(notices)}
	recordings := map[string]bool{}
	rows := map[Kind]*RecordingRow{}
	for _, v := range verdicts {
		recordings[v.pub.Event.RecordingID] = true
		row := rec.row(rows, kindAt(faults, v.pub.First))
		rep.Problems = append(rep.Problems, row.count(v, verdicts)...)
	}
	rec.Recordings, rec.Events = len(recordings), len(verdicts)
	rep.Recording = rec
	return nil
}

// count adds one event to its row and returns its problems: a duplicate
// notice or one out of order, whatever the publisher saw of the event;
// a missing notice only for an event the stream acknowledged. A lost
// event is looked up in RECORDING: one it no longer holds is NATS's loss,
// one it holds jetfn's.
func (row *RecordingRow) count(v eventVerdict, all []eventVerdict) []string {
	row.Events++
	p := v.pub
	var problems []string
	say := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: recording event %s (RECORDING #%d): ", row.Kind, p.ID(), v.inputSeq)+fmt.Sprintf(format, args...))
	}
	if v.notices > 1 {
		row.Duplicates++
		say("%d notices", v.notices)
	}
	if v.before >= 0 {
		row.OutOfOrder++
		b := all[v.before]
		say("out of order: its notice is NOTIFICATIONS #%d, before the notice of %s (RECORDING #%d, stored earlier), NOTIFICATIONS #%d",
			v.noticeSeq, b.pub.ID(), b.inputSeq, b.noticeSeq)
	}
	if p.Acked.IsZero() {
		row.Unknown++
		if v.notices > 0 {
			row.UnknownNoticed++
		}
		return problems
	}
	row.Acked++
	row.Retried += min(p.Attempts-1, 1)
	switch {
	case v.notices > 0:
	case v.deadLettered:
		row.DeadLettered++
		say("no notice; dead-lettered (replayable)")
	case v.inputSeq == 0:
		row.Lost++
		row.LostByNATS++
		say("no notice; %s (acknowledged at #%d)", lostEventByNATS, p.Seq)
	default:
		row.Lost++
		say("no notice; %s", lostEventByJetfn)
	}
	return problems
}

// What a lost recording event's lookup finds.
const (
	lostEventByNATS  = "the event is not in RECORDING"
	lostEventByJetfn = "the event is in RECORDING, jetfn never noticed it"
)

// perKey says how the harness's manifest runs publish-recording-event.
func (h *Harness) perKey() string {
	if h.opts.KeyConcurrency > 0 {
		return fmt.Sprintf("keyConcurrency: %d (no order)", h.opts.KeyConcurrency)
	}
	return "ordered: true"
}

// scanStream reads every message of stream on filter, in stream order.
// It makes one attempt; a stalled fetch is testkit.ErrScanStalled, which
// Retry starts over.
func scanStream(ctx context.Context, js jetstream.JetStream, stream, filter string) ([]storedMsg, error) {
	return testkit.Scan(ctx, js, stream, filter, 1, func(m jetstream.Msg) (storedMsg, error) {
		meta, err := m.Metadata()
		if err != nil {
			return storedMsg{}, err
		}
		return storedMsg{Seq: meta.Sequence.Stream, Subject: m.Subject(),
			MsgID: m.Headers().Get(jetstream.MsgIDHeader), Stored: meta.Timestamp}, nil
	})
}

// recordingEventID is the event ID of a dead-lettered recording event,
// from its payload (kept as the backend sent it), or "" if it is not one.
func recordingEventID(data []byte) string {
	var ev struct {
		TS          int64                     `json:"ts"`
		Event       events.RecordingEventName `json:"event"`
		RecordingID string                    `json:"recordingId"`
	}
	if json.Unmarshal(data, &ev) != nil || ev.RecordingID == "" {
		return ""
	}
	return events.RecordingMsgID(ev.RecordingID, ev.Event, ev.TS)
}
