package publishrecordingevent

import (
	"context"
	"testing"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestRecordAfterCrash runs part of record, as a delivery that crashed
// would have, then the whole of it, as the redelivery does: the event is
// counted once and nothing is left pending.
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
			if stored.Recording != want || len(stored.Pending) != 0 {
				t.Errorf("stored %+v pending %v, want %+v and none pending", stored.Recording, stored.Pending, want)
			}
			if n, _ := s.timeline.CountDocuments(ctx, map[string]string{"recordingId": "rec"}); n != 2 {
				t.Errorf("timeline holds %d events, want 2", n)
			}
		})
	}
}
