package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/events"
)

// history is one recording's four events, acknowledged, with the
// publications judgeRecordings takes.
func history(t *testing.T) []RecordingPublication {
	t.Helper()
	var pubs []RecordingPublication
	for i, name := range events.RecordingEventNames()[:4] {
		ev := events.RecordingEvent{TS: int64(100 + i), Event: name, RecordingID: "rec-0001", ConversationID: "rconv-000"}
		pubs = append(pubs, RecordingPublication{Event: ev, First: time.Unix(int64(i), 0), Acked: time.Unix(int64(i), 1),
			Seq: uint64(i + 1), Attempts: 1})
	}
	return pubs
}

// stored is what a stream holds, in stream order: the messages with the
// IDs given, at sequences from 1.
func stored(ids ...string) []storedMsg {
	out := make([]storedMsg, len(ids))
	for i, id := range ids {
		out[i] = storedMsg{Seq: uint64(i + 1), MsgID: id}
	}
	return out
}

// TestJudgeRecordingsOutOfOrder: a notice stored before the notice of an
// event stored earlier is out of order, named with that event; a history
// in order has nothing to say.
func TestJudgeRecordingsOutOfOrder(t *testing.T) {
	pubs := history(t)
	input := stored(pubs[0].ID(), pubs[1].ID(), pubs[2].ID(), pubs[3].ID())

	inOrder := judgeRecordings(pubs, input, stored(pubs[0].NoticeID(), pubs[1].NoticeID(), pubs[2].NoticeID(), pubs[3].NoticeID()), nil)
	for _, v := range inOrder {
		if v.before >= 0 || v.notices != 1 {
			t.Errorf("in order: %s: before %d, %d notices", v.pub.ID(), v.before, v.notices)
		}
	}

	// Stored 0, 1, 2, 3; noticed 0, 3, 2, 1 (NOTIFICATIONS #1, #4, #3, #2
	// in stored order). Walking the stored order: 0 and 1 are in order; 2
	// (#3) and 3 (#2) were noticed before 1 (#4), stored before them.
	swapped := judgeRecordings(pubs, input, stored(pubs[0].NoticeID(), pubs[3].NoticeID(), pubs[2].NoticeID(), pubs[1].NoticeID()), nil)
	want := []int{-1, -1, 1, 1}
	for i, v := range swapped {
		if v.before != want[i] {
			t.Errorf("swapped: %s: before %d, want %d", v.pub.ID(), v.before, want[i])
		}
	}

	rep := &RecordingReport{}
	row := rep.row(map[Kind]*RecordingRow{}, steadyKind)
	var problems []string
	for _, v := range swapped {
		problems = append(problems, row.count(v, swapped)...)
	}
	if row.OutOfOrder != 2 || row.Events != 4 || row.Acked != 4 || row.Lost != 0 || len(problems) != 2 {
		t.Fatalf("row %+v, problems %q", *row, problems)
	}
	if !strings.Contains(problems[0], "out of order") || !strings.Contains(problems[0], pubs[1].ID()) {
		t.Errorf("problem %q does not name the order and the event noticed later", problems[0])
	}
	r := &Report{Recording: rep}
	rep.Rows = []*RecordingRow{row}
	if r.OK() {
		t.Error("a report with events out of order is OK")
	}
}

// TestJudgeRecordingsOrderIsStorageOrder: the order is RECORDING's first
// storage of each event, not the publisher's: an event stored again later
// (a duplicate the stream failed to drop) keeps its first place, and two
// recordings are judged apart.
func TestJudgeRecordingsOrderIsStorageOrder(t *testing.T) {
	pubs := history(t)[:2]
	other := RecordingPublication{Event: events.RecordingEvent{TS: 50, Event: events.RecordingRequested, RecordingID: "rec-0002",
		ConversationID: "rconv-000"}, Acked: time.Unix(9, 0)}
	pubs = append(pubs, other)
	input := stored(pubs[0].ID(), other.ID(), pubs[1].ID(), pubs[0].ID())
	// other's notice first, then the first recording's in order.
	v := judgeRecordings(pubs, input, stored(other.NoticeID(), pubs[0].NoticeID(), pubs[1].NoticeID()), nil)
	for _, x := range v {
		if x.before >= 0 {
			t.Errorf("%s: out of order behind %d", x.pub.ID(), x.before)
		}
	}
	if v[0].inputSeq != 1 {
		t.Errorf("first storage of %s is #%d, want #1", pubs[0].ID(), v[0].inputSeq)
	}
}

// TestJudgeRecordingsLostDuplicatedDead: an acknowledged event without a
// notice is lost (NATS's when RECORDING does not hold it), or dead-lettered;
// two notices of one event are a duplicate; an unacknowledged event is
// unknown, never lost.
func TestJudgeRecordingsLostDuplicatedDead(t *testing.T) {
	pubs := history(t)
	pubs[3].Acked = time.Time{} // unknown, not stored, not noticed
	input := stored(pubs[0].ID(), pubs[1].ID())
	notices := stored(pubs[0].NoticeID(), pubs[0].NoticeID())
	dead := map[string]bool{pubs[1].ID(): true}
	v := judgeRecordings(pubs, input, notices, dead)
	rep := &RecordingReport{}
	row := rep.row(map[Kind]*RecordingRow{}, steadyKind)
	var problems []string
	for _, x := range v {
		problems = append(problems, row.count(x, v)...)
	}
	if row.Duplicates != 1 || row.DeadLettered != 1 || row.Lost != 1 || row.LostByNATS != 1 || row.Unknown != 1 || row.OutOfOrder != 0 {
		t.Errorf("row %+v", *row)
	}
	if len(problems) != 3 {
		t.Errorf("problems %q, want a duplicate, a dead letter and a loss", problems)
	}
}

// TestRecordingBursts: every recording gets the nine events once, in
// lifecycle order, a valid payload each (deleted with its reason), bursts
// of at most burstSize events of one recording.
func TestRecordingBursts(t *testing.T) {
	bursts := recordingBursts(6)
	seen := map[string][]events.RecordingEventName{}
	for _, b := range bursts {
		if len(b) == 0 || len(b) > burstSize {
			t.Fatalf("burst of %d", len(b))
		}
		for _, ev := range b {
			if ev.RecordingID != b[0].RecordingID {
				t.Fatalf("a burst of two recordings: %v", b)
			}
			ev.TS = 1
			if _, err := events.RecordingEventPayload.Encode(ev); err != nil {
				t.Fatalf("%s %s: %v", ev.RecordingID, ev.Event, err)
			}
			seen[ev.RecordingID] = append(seen[ev.RecordingID], ev.Event)
		}
	}
	if len(seen) != 6 {
		t.Fatalf("%d recordings, want 6", len(seen))
	}
	for id, names := range seen {
		if !slices.Equal(names, events.RecordingEventNames()) {
			t.Errorf("%s: %v", id, names)
		}
	}
}
