package publishrecordingevent

import (
	"context"
	"testing"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestRecordAfterCrash runs part of record, as a delivery that crashed
// would have, then the whole of it, as the redelivery does: the event is
// counted once, and eventCount is the number of keys counted.
func TestRecordAfterCrash(t *testing.T) {
	payload := []byte(`{"by":"backend"}`)
	tests := []struct {
		name  string
		crash func(context.Context, store, events.RecordingEvent) error
	}{
		{name: "after counting", crash: func(ctx context.Context, s store, ev events.RecordingEvent) error {
			_, err := s.count(ctx, ev)
			return err
		}},
		{name: "after the timeline insert", crash: func(ctx context.Context, s store, ev events.RecordingEvent) error {
			if _, err := s.count(ctx, ev); err != nil {
				return err
			}
			return s.addToTimeline(ctx, ev, payload)
		}},
		{name: "after the whole record", crash: func(ctx context.Context, s store, ev events.RecordingEvent) error {
			_, err := s.record(ctx, ev, payload)
			return err
		}},
	}
	_, client := runtimetest.StartMongo(t)
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(client.Database(dbName(t)))
			first := recEvent("rec", "conv", events.RecordingRequested, 10)
			if _, err := s.record(ctx, first, payload); err != nil {
				t.Fatal(err)
			}
			ev := recEvent("rec", "conv", events.RecordingStarted, int64(20+i))
			if err := tt.crash(ctx, s, ev); err != nil {
				t.Fatal(err)
			}
			got, err := s.record(ctx, ev, payload)
			if err != nil {
				t.Fatal(err)
			}
			want := events.Recording{ID: "rec", ConversationID: "conv", State: events.RecordingStarted,
				FirstTS: 10, LastTS: ev.TS, EventCount: 2}
			if got.Recording != want {
				t.Errorf("returned\n got %+v\nwant %+v", got.Recording, want)
			}
			var stored recordingDoc
			if err := s.recordings.FindOne(ctx, map[string]string{"_id": "rec"}).Decode(&stored); err != nil {
				t.Fatal(err)
			}
			if stored.Recording != want || len(stored.Counted) != want.EventCount {
				t.Errorf("stored %+v counted %v, want %+v and %d counted", stored.Recording, stored.Counted, want, want.EventCount)
			}
			if n, _ := s.timeline.CountDocuments(ctx, map[string]string{"recordingId": "rec"}); n != 2 {
				t.Errorf("timeline holds %d events, want 2", n)
			}
		})
	}
}

// TestRecordInterleavedDeliveries runs two deliveries of one event as two
// instances can interleave them (a redelivery after ackWait while the
// first delivery still runs, or the stream's copy and a replay): the slow
// one has looked at the timeline before the fast one stored the event, and
// makes its counting update at a later point of the fast one's run. The
// event is counted once wherever that point falls.
//
// The steps run one after another, not at once: FerretDB applies an update
// by reading and rewriting the whole document, so two truly concurrent
// updates of one recording lose one of them there whatever the filter says
// (see recordingLocks); MongoDB applies each update atomically, which is
// what count relies on.
func TestRecordInterleavedDeliveries(t *testing.T) {
	payload := []byte(`{"by":"backend"}`)
	tests := []struct {
		name string
		fast func(context.Context, store, events.RecordingEvent) error
	}{
		{name: "slow counts while the fast one is between its count and its timeline insert",
			fast: func(ctx context.Context, s store, ev events.RecordingEvent) error {
				_, err := s.count(ctx, ev)
				return err
			}},
		{name: "slow counts after the fast one finished", fast: func(ctx context.Context, s store, ev events.RecordingEvent) error {
			_, err := s.record(ctx, ev, payload)
			return err
		}},
	}
	_, client := runtimetest.StartMongo(t)
	ctx := context.Background()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(client.Database(dbName(t)))
			if _, err := s.record(ctx, recEvent("rec", "conv", events.RecordingRequested, 10), payload); err != nil {
				t.Fatal(err)
			}
			ev := recEvent("rec", "conv", events.RecordingStarted, int64(20+i))
			if err := tt.fast(ctx, s, ev); err != nil {
				t.Fatal(err)
			}
			if _, err := s.count(ctx, ev); err != nil { // the slow delivery's counting update
				t.Fatal(err)
			}
			for range 2 { // the slow delivery's remaining steps, and the fast one's if it had any
				if _, err := s.record(ctx, ev, payload); err != nil {
					t.Fatal(err)
				}
			}
			var stored recordingDoc
			if err := s.recordings.FindOne(ctx, map[string]string{"_id": "rec"}).Decode(&stored); err != nil {
				t.Fatal(err)
			}
			if stored.EventCount != 2 {
				t.Errorf("eventCount %d, want 2: the started event was counted %d times", stored.EventCount, stored.EventCount-1)
			}
			if n, _ := s.timeline.CountDocuments(ctx, map[string]string{"recordingId": "rec"}); n != 2 {
				t.Errorf("timeline holds %d events, want 2", n)
			}
		})
	}
}
