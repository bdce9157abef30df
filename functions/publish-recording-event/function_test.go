package publishrecordingevent

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/jetfntest"
	"github.com/jetfn/jetfn/wire"
)

const (
	baseTS  = int64(1_760_000_000_000)
	settle  = 2 * time.Minute
	seedLog = "shuffle seed %d"
)

var _ jetfn.Handler = (*Function)(nil)

func TestNewNeedsMongoAndPublisher(t *testing.T) {
	if _, err := New(jetfn.Deps{}); !errors.Is(err, jetfn.ErrNoMongo) {
		t.Fatalf("New without Mongo: %v, want jetfn.ErrNoMongo", err)
	}
}

// result is everything the function leaves behind for one recording.
type result struct {
	recording recordingDoc
	timeline  []eventDoc
	notices   []notice
}

// play publishes evs to a fresh stack and returns what the function made of
// them once every message is settled.
func play(t *testing.T, evs []events.RecordingEvent) result {
	t.Helper()
	e := newEnv(t)
	e.publish(evs...)
	e.waitSettled(len(evs), settle)
	rec := e.recording(evs[0].RecordingID)
	slices.Sort(rec.Counted) // in the order the events were counted
	return result{recording: rec, timeline: e.timeline(evs[0].RecordingID), notices: e.notices()}
}

func TestStartStopDeleteRun(t *testing.T) {
	evs := startStopDelete("rec-1", "conv-1", baseTS)
	got := play(t, evs)
	want := events.Recording{ID: "rec-1", ConversationID: "conv-1", State: events.RecordingDeleted,
		FirstTS: baseTS, LastTS: baseTS + 6000, EventCount: 7, Failed: false, Reason: "user-deleted"}
	if got.recording.Recording != want {
		t.Errorf("recording\n got %+v\nwant %+v", got.recording.Recording, want)
	}
	if len(got.timeline) != 7 {
		t.Fatalf("timeline has %d events, want 7", len(got.timeline))
	}
	for _, d := range got.timeline {
		if !strings.Contains(d.Payload, `"by":"backend"`) {
			t.Errorf("timeline %s lost the unknown field: %s", d.ID, d.Payload)
		}
	}
	if len(got.notices) != 7 {
		t.Fatalf("%d notices, want 7", len(got.notices))
	}
	for i, n := range got.notices {
		checkNotice(t, n, evs[i].ConversationID)
	}
	last := got.notices[6].body
	if last.State != events.RecordingDeleted || last.Failed || last.Reason != "user-deleted" {
		t.Errorf("last notice %+v, want state deleted, not failed, reason user-deleted", last)
	}
}

// checkNotice holds a notice to the contract: subject, message ID, and its
// payload as a Go consumer decodes it (events.RecordingNoticePayload) and
// as another language validates it (the JSON Schema alone).
func checkNotice(t *testing.T, n notice, conversationID string) {
	t.Helper()
	b := n.body
	if want := events.RecordingNoticeSubject(conversationID); n.subject != want {
		t.Errorf("notice on %s, want %s", n.subject, want)
	}
	if want := jetfntest.MsgID(Name, n.subject, events.RecordingMsgID(b.RecordingID, b.Event, b.TS)); n.msgID != want {
		t.Errorf("notice Nats-Msg-Id %q, want %q", n.msgID, want)
	}
	if _, err := events.RecordingNoticePayload.Decode(n.data); err != nil {
		t.Errorf("notice %s: %v", n.data, err)
	}
	if err := noticeSchemaErr(n.data); err != nil {
		t.Errorf("notice %s refused by the schema: %v", n.data, err)
	}
}

func TestDuplicatedShuffledRunEndsTheSame(t *testing.T) {
	evs := startStopDelete("rec-1", "conv-1", baseTS)
	seed := uint64(time.Now().UnixNano())
	t.Logf(seedLog, seed)
	twice := slices.Concat(evs, evs)
	rand.New(rand.NewPCG(seed, seed)).Shuffle(len(twice), func(i, j int) { twice[i], twice[j] = twice[j], twice[i] })

	inOrder := play(t, evs)
	shuffled := play(t, twice)
	if !reflect.DeepEqual(shuffled.recording, inOrder.recording) {
		t.Errorf("recording\n got %+v\nwant %+v", shuffled.recording, inOrder.recording)
	}
	if !reflect.DeepEqual(shuffled.timeline, inOrder.timeline) {
		t.Errorf("timeline\n got %+v\nwant %+v", shuffled.timeline, inOrder.timeline)
	}
	if len(shuffled.notices) != 7 {
		t.Fatalf("%d notices for 14 deliveries, want 7", len(shuffled.notices))
	}
	var ids, wantIDs []string
	for i, n := range shuffled.notices {
		checkNotice(t, n, "conv-1")
		ids, wantIDs = append(ids, n.msgID), append(wantIDs, jetfntest.MsgID(Name, n.subject, evs[i].MsgID()))
	}
	slices.Sort(ids)
	slices.Sort(wantIDs)
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("notice IDs %v, want %v", ids, wantIDs)
	}
}

func TestRecordingState(t *testing.T) {
	deleted := func(rec string, ts int64, reason string) events.RecordingEvent {
		ev := recEvent(rec, "conv", events.RecordingDeleted, ts)
		ev.Reason = reason
		return ev
	}
	ev := func(rec string, n events.RecordingEventName, ts int64) events.RecordingEvent {
		return recEvent(rec, "conv", n, ts)
	}
	tests := []struct {
		name   string
		events []events.RecordingEvent
		want   events.Recording
	}{
		{
			name:   "never started",
			events: []events.RecordingEvent{ev("a", events.RecordingRequested, 10), deleted("a", 20, "never-started")},
			want:   events.Recording{State: events.RecordingDeleted, FirstTS: 10, LastTS: 20, EventCount: 2, Failed: true, Reason: "never-started"},
		},
		{
			name:   "never started, deletion first",
			events: []events.RecordingEvent{deleted("b", 20, "never-started"), ev("b", events.RecordingRequested, 10)},
			want:   events.Recording{State: events.RecordingDeleted, FirstTS: 10, LastTS: 20, EventCount: 2, Failed: true, Reason: "never-started"},
		},
		{
			name: "stored arriving after the deletion",
			events: []events.RecordingEvent{ev("c", events.RecordingStarted, 10), deleted("c", 40, "retention"),
				ev("c", events.RecordingStored, 30)},
			want: events.Recording{State: events.RecordingDeleted, FirstTS: 10, LastTS: 40, EventCount: 3, Reason: "retention"},
		},
		{
			name:   "older event arriving late",
			events: []events.RecordingEvent{ev("d", events.RecordingStopped, 30), ev("d", events.RecordingStarted, 20)},
			want:   events.Recording{State: events.RecordingStopped, FirstTS: 20, LastTS: 30, EventCount: 2},
		},
		{
			name:   "same ts: the later lifecycle step wins",
			events: []events.RecordingEvent{ev("e", events.RecordingUploaded, 30), ev("e", events.RecordingStopped, 30)},
			want:   events.Recording{State: events.RecordingUploaded, FirstTS: 30, LastTS: 30, EventCount: 2},
		},
		{
			name: "two deletions: the latest reason",
			events: []events.RecordingEvent{deleted("f", 50, "second"), ev("f", events.RecordingRequested, 10),
				deleted("f", 40, "first")},
			want: events.Recording{State: events.RecordingDeleted, FirstTS: 10, LastTS: 50, EventCount: 3, Failed: true, Reason: "second"},
		},
	}
	e := newEnv(t)
	total := 0
	for _, tt := range tests {
		// One at a time, in the listed order: each case is about order.
		for _, ev := range tt.events {
			total++
			e.publish(ev)
			e.waitSettled(total, settle)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tt.events[0].RecordingID
			want := tt.want
			want.ID, want.ConversationID = rec, "conv"
			if got := e.recording(rec).Recording; got != want {
				t.Errorf("recording\n got %+v\nwant %+v", got, want)
			}
		})
	}
	for _, n := range e.notices() {
		checkNotice(t, n, "conv")
	}
}

func TestMalformedIsDeadLettered(t *testing.T) {
	const ok = `"ts":1,"recordingId":"r","conversationId":"c"`
	tests := []struct {
		name       string
		subject    string
		payload    string
		wantReason string
	}{
		{name: "bad JSON", subject: "recording.started", payload: `{"ts":`,
			wantReason: "payload: not JSON at byte 6: ends before the value is complete"},
		{name: "unknown event", subject: "recording.failed", payload: `{"event":"failed",` + ok + `}`,
			wantReason: `payload: event: want one of "requested", "recording-confirmed", "started", "stop-requested", "stopped", "uploaded", "stored", "downloaded", "deleted", got "failed"`},
		{name: "missing recordingId", subject: "recording.started", payload: `{"event":"started","ts":1,"conversationId":"c"}`,
			wantReason: "payload: recordingId: missing"},
		{name: "deleted without reason", subject: "recording.deleted", payload: `{"event":"deleted",` + ok + `}`,
			wantReason: `payload: reason: missing (required when event is "deleted")`},
		{name: "recordingId with dot", subject: "recording.started", payload: `{"event":"started","ts":1,"recordingId":"a.b","conversationId":"c"}`,
			wantReason: `payload: recordingId: must not contain '.' (got "a.b")`},
		{name: "recordingId with >", subject: "recording.started", payload: `{"event":"started","ts":1,"recordingId":"a>","conversationId":"c"}`,
			wantReason: `payload: recordingId: must not contain '>' (got "a>")`},
		{name: "ts zero", subject: "recording.started", payload: `{"event":"started","ts":0,"recordingId":"r","conversationId":"c"}`,
			wantReason: "payload: ts: want at least 1, got 0"},
		{name: "event on another subject", subject: "recording.stopped", payload: `{"event":"started",` + ok + `}`, wantReason: "arrived on recording.stopped"},
	}
	e := newEnv(t)
	for _, tt := range tests {
		e.publishRaw(tt.subject, tt.payload)
	}
	good := recEvent("rec-ok", "conv-ok", events.RecordingStarted, baseTS)
	e.publish(good)
	e.waitSettled(len(tests)+1, settle)

	dead := e.streamMsgs("DEADLETTER")
	bySeq := map[string]string{}
	for _, m := range dead {
		bySeq[m.Header.Get(wire.HeaderStreamSequence)] = m.Header.Get(wire.HeaderError)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, ok := bySeq[fmt.Sprint(i+1)]
			if !ok {
				t.Fatalf("not dead-lettered")
			}
			if !strings.Contains(reason, tt.wantReason) {
				t.Errorf("reason %q, want it to contain %q", reason, tt.wantReason)
			}
		})
	}
	if len(dead) != len(tests) {
		t.Errorf("%d dead letters, want %d", len(dead), len(tests))
	}
	info := e.consumer()
	if info.NumRedelivered != 0 || info.Delivered.Consumer != uint64(len(tests)+1) {
		t.Errorf("delivered %d times with %d redelivered; want %d deliveries, none again",
			info.Delivered.Consumer, info.NumRedelivered, len(tests)+1)
	}
	if got := e.recording("rec-ok"); got.State != events.RecordingStarted {
		t.Errorf("the valid event after them was not recorded: %+v", got.Recording)
	}
}

func TestConversationMismatchIsPermanent(t *testing.T) {
	e := newEnv(t)
	e.publish(recEvent("rec-1", "conv-a", events.RecordingRequested, baseTS))
	e.waitSettled(1, settle)
	e.publish(recEvent("rec-1", "conv-b", events.RecordingStarted, baseTS+1))
	e.waitSettled(2, settle)
	dead := e.streamMsgs("DEADLETTER")
	if len(dead) != 1 || !strings.Contains(dead[0].Header.Get(wire.HeaderError), "conv-a") {
		t.Fatalf("dead letters %d, want 1 naming conv-a", len(dead))
	}
	if got := e.recording("rec-1"); got.EventCount != 1 || got.State != events.RecordingRequested {
		t.Errorf("recording %+v, want only the first event counted", got.Recording)
	}
	if n := len(e.timeline("rec-1")); n != 1 {
		t.Errorf("timeline holds %d events, want 1", n)
	}
}

// TestThousandEventsInterleaved keeps per-recording state right while one
// recording's 1,000 events arrive shuffled among 100 other recordings'.
func TestThousandEventsInterleaved(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000+ events through FerretDB")
	}
	big := startStopDelete("big", "conv-big", baseTS)
	deletion := big[6]
	big = big[:6]
	for i := range 993 { // downloads between stored and the deletion
		big = append(big, recEvent("big", "conv-big", events.RecordingDownloaded, baseTS+6000+int64(i)))
	}
	deletion.TS = baseTS + 10_000
	big = append(big, deletion)

	all := slices.Clone(big)
	want := map[string]events.Recording{"big": {ID: "big", ConversationID: "conv-big", State: events.RecordingDeleted,
		FirstTS: baseTS, LastTS: baseTS + 10_000, EventCount: 1000, Reason: "user-deleted"}}
	for r := range 100 {
		id := fmt.Sprintf("rec-%d", r)
		run := startStopDelete(id, "conv-"+id, baseTS+int64(r))[:1+r%7]
		all = append(all, run...)
		last := run[len(run)-1]
		want[id] = events.Recording{ID: id, ConversationID: "conv-" + id, State: last.Event,
			FirstTS: run[0].TS, LastTS: last.TS, EventCount: len(run), Reason: last.Reason}
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf(seedLog, seed)
	rand.New(rand.NewPCG(seed, seed)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })

	e := newEnv(t)
	start := time.Now()
	e.publish(all...)
	e.waitSettled(len(all), 10*time.Minute)
	elapsed := time.Since(start)
	t.Logf("%d events recorded in %s (%.0f events/s)", len(all), elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds())

	for id, w := range want {
		if got := e.recording(id); got.Recording != w {
			t.Errorf("%s\n got %+v\nwant %+v", id, got.Recording, w)
		}
	}
	if n := e.streamCount("NOTIFICATIONS"); n != len(all) {
		t.Errorf("%d notices, want %d", n, len(all))
	}
}

func TestStateKeySortsLikeTheStateRule(t *testing.T) {
	tests := []struct {
		name         string
		older, newer events.RecordingEvent
	}{
		{name: "ts decides", older: recEvent("r", "c", events.RecordingDeleted, 9), newer: recEvent("r", "c", events.RecordingRequested, 10)},
		{name: "more digits", older: recEvent("r", "c", events.RecordingStopped, 999), newer: recEvent("r", "c", events.RecordingStarted, 1000)},
		{name: "same ts: lifecycle", older: recEvent("r", "c", events.RecordingStopped, 5), newer: recEvent("r", "c", events.RecordingUploaded, 5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if stateKey(tt.older) >= stateKey(tt.newer) {
				t.Errorf("%s does not sort before %s", stateKey(tt.older), stateKey(tt.newer))
			}
			if got := stateOf(stateKey(tt.newer)); got != tt.newer.Event {
				t.Errorf("stateOf = %s, want %s", got, tt.newer.Event)
			}
		})
	}
}
