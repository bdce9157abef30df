package opscheck

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// history builds an observed run of recording inputs by hand, for the
// checker alone.
type history struct {
	o  *observed
	t0 time.Time
	n  int
}

func newHistoryOf() *history {
	t0 := time.Now()
	return &history{t0: t0, o: &observed{book: newLedger(), window: time.Minute, settleStart: t0.Add(time.Hour),
		effects: &effects{docs: map[string][]document{}, eventCounts: map[string]int{}, timeline: map[string]int{},
			countedWithoutEntry: map[string][]string{}}}}
}

// input publishes the next good recording input of recording rec, stored
// at RECORDING:seq at t0+at (zero seq: an attempt without a PubAck), and
// handled once, with the outputs stored at outs.
func (h *history) input(rec int, mode Mode, seq uint64, at time.Duration, outs ...uint64) *Input {
	h.n++
	in := newInput(1, h.n, Recording, recordingSubjects[h.n%2], Good, rec)
	b := h.o.book
	b.sent(in, mode)
	b.first[in.Token] = h.t0.Add(at - time.Second)
	if seq > 0 {
		b.ack(in.Token)
		b.add(in.Token, copyRec{Mode: mode, At: h.t0.Add(at), Stream: recordingStream, Seq: seq, Definite: true})
	} else {
		b.add(in.Token, copyRec{Mode: mode, At: h.t0.Add(at)})
	}
	if len(outs) > 0 {
		h.o.effects.docs[in.Token] = []document{{ID: in.MsgID, Token: in.Token}}
		h.o.effects.eventCounts[in.RecordingID]++
		h.o.effects.timeline[in.RecordingID]++
	}
	for _, s := range outs {
		h.o.outputs = append(h.o.outputs, output{Seq: s, At: h.t0.Add(at + time.Second), Token: in.Token, Recording: in.RecordingID,
			MsgID: "jetfn:" + recordingName + ":conversation.opscheck.recording:" + in.MsgID})
	}
	return in
}

// copyAgain adds a second stored copy of in (a Double's second send).
func (h *history) copyAgain(in *Input, seq uint64, at time.Duration) {
	h.o.book.add(in.Token, copyRec{Mode: Double, At: h.t0.Add(at), Stream: recordingStream, Seq: seq, Definite: true})
}

// deadLetterAndReplay: in was dead-lettered, then replayed to RECORDING:seq.
func (h *history) deadLetterAndReplay(in *Input, dlSeq, seq uint64) {
	h.o.dls = append(h.o.dls, &deadLetter{Seq: dlSeq, Token: in.Token, Function: recordingName, Error: "mongo down"})
	h.o.replays = append(h.o.replays, replayRec{DLSeq: dlSeq, Token: in.Token, Stream: recordingStream, StoredSeq: seq})
}

func (h *history) deleteStream(from, to time.Duration) {
	h.o.deletions = append(h.o.deletions, deletion{Stream: recordingStream, Start: h.t0.Add(from), End: h.t0.Add(to)})
}

func outOfOrder(vs []Violation) []Violation {
	return slices.DeleteFunc(slices.Clone(vs), func(v Violation) bool { return v.What != VOutOfOrder })
}

// TestOrderCheckPasses: two recordings interleaved, each one's notices in
// the order of its inputs, is a run without a single violation; so are the
// interleavings the order allows between recordings.
func TestOrderCheckPasses(t *testing.T) {
	h := newHistoryOf()
	h.input(0, Careful, 1, 1*time.Second, 10)
	h.input(1, Bare, 2, 2*time.Second, 13) // another recording: any place
	h.input(0, Careful, 3, 3*time.Second, 11)
	h.input(1, Careful, 4, 4*time.Second, 14)
	h.input(0, Bare, 5, 5*time.Second, 12)
	if vs := check(h.o); len(vs) > 0 {
		t.Errorf("a history in order has %d violations: %+v", len(vs), vs)
	}
	if h.o.placed != 5 {
		t.Errorf("the order check placed %d inputs, want 5", h.o.placed)
	}
}

// TestOrderCheckFails: a notice stored before that of an event of its
// recording stored earlier is a violation, of the input that overtook,
// naming every input it overtook.
func TestOrderCheckFails(t *testing.T) {
	h := newHistoryOf()
	a := h.input(0, Careful, 1, 1*time.Second, 10)
	b := h.input(0, Careful, 2, 2*time.Second, 13)
	c := h.input(0, Careful, 3, 3*time.Second, 14)
	d := h.input(0, Careful, 4, 4*time.Second, 12) // overtook b and c
	h.input(1, Careful, 5, 5*time.Second, 11)      // another recording: no order with the others
	vs := check(h.o)
	if len(vs) != 1 || vs[0].What != VOutOfOrder || vs[0].Token != d.Token {
		t.Fatalf("violations %+v, want one %s of %s", vs, VOutOfOrder, d.Token)
	}
	ev := strings.Join(vs[0].Evidence, "\n")
	for _, want := range []string{"overtook " + b.Token, "overtook " + c.Token, "first output OUT:12", d.RecordingID} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence lacks %q:\n%s", want, ev)
		}
	}
	if strings.Contains(ev, "overtook "+a.Token) {
		t.Errorf("evidence names %s, which came first:\n%s", a.Token, ev)
	}
	if vs[0].Suspects[0] != SUnexplained {
		t.Errorf("suspects %v with an ordered function, want %s", vs[0].Suspects, SUnexplained)
	}
}

// TestOrderCheckPlaces: what the operator's own actions reorder breaks no
// order, and a deletion of the stream does not hide a real break.
func TestOrderCheckPlaces(t *testing.T) {
	tests := []struct {
		name  string
		build func(h *history)
		want  int
	}{
		{name: "a replayed dead letter is a new message", build: func(h *history) {
			a := h.input(0, Careful, 1, time.Second, 20)
			h.input(0, Careful, 2, 2*time.Second, 10)
			h.deadLetterAndReplay(a, 1, 3)
		}},
		{name: "a careless double's second copy has a place of its own", build: func(h *history) {
			a := h.input(0, Double, 1, time.Second, 20)
			h.copyAgain(a, 3, time.Second)
			h.input(0, Careful, 2, 2*time.Second, 10)
		}},
		{name: "a send without a PubAck has no known place", build: func(h *history) {
			h.input(0, Bare, 0, time.Second, 20)
			h.input(0, Careful, 2, 2*time.Second, 10)
		}},
		{name: "a later incarnation of the stream comes after", build: func(h *history) {
			h.input(0, Careful, 7, time.Second, 10)
			h.deleteStream(5*time.Second, 6*time.Second)
			h.input(0, Careful, 1, 10*time.Second, 11)
		}},
		{name: "a later incarnation overtaking an earlier one", want: 1, build: func(h *history) {
			h.input(0, Careful, 7, time.Second, 11)
			h.deleteStream(5*time.Second, 6*time.Second)
			h.input(0, Careful, 1, 10*time.Second, 10)
		}},
		{name: "stored while the stream was deleted: no known incarnation", build: func(h *history) {
			h.input(0, Careful, 7, time.Second, 11)
			h.deleteStream(5*time.Second, 6*time.Second)
			h.input(0, Careful, 1, 7*time.Second, 10)
		}},
		{name: "a repeat's output is not its place", build: func(h *history) {
			h.input(0, Careful, 1, time.Second, 10, 30)
			h.input(0, Careful, 2, 2*time.Second, 20)
		}},
		{name: "inputs without an output have no place", build: func(h *history) {
			h.input(0, Careful, 1, time.Second)
			h.input(0, Careful, 2, 2*time.Second, 10)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHistoryOf()
			tt.build(h)
			if vs := outOfOrder(check(h.o)); len(vs) != tt.want {
				t.Errorf("%d order violations, want %d: %+v", len(vs), tt.want, vs)
			}
		})
	}
}

// TestOrderCheckFilter: an input whose subject a live revision's filter
// left out has no place; with the function removed instead, it keeps it
// (its messages wait in the input, in order); and an unordered revision is
// the suspect.
func TestOrderCheckFilter(t *testing.T) {
	narrowed, removed, unordered := baseRevision(), baseRevision(), baseRevision()
	narrowed.Recording.Filter = []string{"recording.started"}
	removed.Recording.Present = false
	unordered.Keying = "keyConcurrency: 4"
	for _, tt := range []struct {
		name    string
		rev     Revision
		want    int
		suspect string
	}{
		{name: "narrowed", rev: narrowed, want: 0},
		{name: "removed", rev: removed, want: 1, suspect: SUnexplained},
		{name: "unordered", rev: unordered, want: 1, suspect: SNotOrdered},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := tt.rev.check(minWindow(), 1, false)
			if err != nil {
				t.Fatal(err)
			}
			h := newHistoryOf()
			h.o.live = []liveRev{{At: h.t0, M: m}}
			h.input(0, Careful, 1, time.Second, 11) // recording.stopped
			h.input(0, Careful, 2, 2*time.Second, 10)
			vs := outOfOrder(check(h.o))
			if len(vs) != tt.want {
				t.Fatalf("%d order violations, want %d: %+v", len(vs), tt.want, vs)
			}
			if tt.want > 0 && !slices.Contains(vs[0].Suspects, tt.suspect) {
				t.Errorf("suspects %v, want %s", vs[0].Suspects, tt.suspect)
			}
		})
	}
}

// TestCountCheck: a recording's eventCount must match its timeline.
func TestCountCheck(t *testing.T) {
	for _, tt := range []struct {
		delta int
		want  string
	}{{1, VDoubleCount}, {-1, VCountLost}} {
		h := newHistoryOf()
		in := h.input(0, Careful, 1, time.Second, 10)
		h.o.effects.eventCounts[in.RecordingID] += tt.delta
		vs := check(h.o)
		if len(vs) != 1 || vs[0].What != tt.want || !strings.Contains(vs[0].Evidence[0], in.RecordingID) {
			t.Errorf("eventCount off by %d: violations %+v, want one %s", tt.delta, vs, tt.want)
		}
	}
}

// TestCountCheckExcusesADeletedRepair: an event counted without its
// timeline entry (a delivery that failed between the two, then
// dead-lettered) is excused when a stream deletion exposed its input,
// since the deletion took the message whose replay would have inserted
// the entry (seed 20261209), and is still an event counted twice when
// nothing was deleted.
func TestCountCheckExcusesADeletedRepair(t *testing.T) {
	for _, deleted := range []bool{true, false} {
		h := newHistoryOf()
		h.input(0, Careful, 1, time.Second, 10)
		half := h.input(0, Careful, 2, 2*time.Second)
		h.o.effects.eventCounts[half.RecordingID]++
		h.o.effects.countedWithoutEntry[half.RecordingID] = []string{half.Token}
		if deleted {
			h.o.deletions = []deletion{{Stream: recordingStream, Start: h.t0.Add(3 * time.Second), End: h.t0.Add(4 * time.Second)}}
		}
		var counts []Violation
		for _, v := range check(h.o) {
			if v.What == VDoubleCount || v.What == VCountLost {
				counts = append(counts, v)
			}
		}
		if deleted && len(counts) != 0 {
			t.Errorf("stream deleted after the input: count violations %+v, want none", counts)
		}
		if !deleted && (len(counts) != 1 || counts[0].What != VDoubleCount) {
			t.Errorf("nothing deleted: count violations %+v, want one %s", counts, VDoubleCount)
		}
	}
}

// TestRecordingTokens: a timeline entry, a notice and a payload lead back
// to their input, though several inputs share the recording.
func TestRecordingTokens(t *testing.T) {
	in := newInput(18, 42, Recording, "recording.stopped", Good, 3)
	if in.RecordingID != "s18-rec3" || in.MsgID != "s18-rec3:stopped:1700000000042" {
		t.Fatalf("input %+v", in)
	}
	if tok, rec := timelineToken(in.MsgID); tok != in.Token || rec != in.RecordingID {
		t.Errorf("timeline entry %s: token %s, recording %s", in.MsgID, tok, rec)
	}
	if tok := tokenOfPayload(in.payload()); tok != in.Token {
		t.Errorf("payload %s: token %s, want %s", in.payload(), tok, in.Token)
	}
	a, b := newInput(18, 43, Recording, "recording.stopped", Schema, 3), newInput(18, 44, Recording, "recording.stopped", Schema, 3)
	if a.MsgID == b.MsgID || a.TS >= 1 {
		t.Errorf("two schema poisons of one recording: ids %s and %s, ts %d", a.MsgID, b.MsgID, a.TS)
	}
	if tok, rec := tokenOfOutput([]byte(`{"recordingId":"s18-rec3","event":"stopped","ts":1700000000042,"state":"stopped","failed":false}`)); tok != in.Token || rec != in.RecordingID {
		t.Errorf("notice: token %s, recording %s", tok, rec)
	}
}
