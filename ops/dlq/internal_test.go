package dlq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

func TestBaseID(t *testing.T) {
	tests := []struct {
		id, wantBase string
	}{
		{id: "TEST:5", wantBase: "TEST:5"},
		{id: "greet-7:replay:1", wantBase: "greet-7"},
		{id: "a:replay:1:replay:3", wantBase: "a:replay:1"},
		{id: "a:replay:x", wantBase: "a:replay:x"},
		{id: "a:replay:0", wantBase: "a:replay:0"},
	}
	for _, tt := range tests {
		if base := baseID(tt.id); base != tt.wantBase {
			t.Errorf("baseID(%q) = %q; want %q", tt.id, base, tt.wantBase)
		}
	}
}

func TestPlanReplay(t *testing.T) {
	letter := Letter{Seq: 9, OriginalSubject: "test.in", OriginalStream: "TEST", OriginalSeq: 4}
	withID := letter
	withID.OriginalMsgID = "greet-7:replay:2"
	recorded := letter
	recorded.Identity, recorded.OriginalStreamIdentity = "TEST@Ab3dEf9x:4", "Ab3dEf9x"
	recordedReplay := withID
	recordedReplay.Identity = "greet-7"
	tests := []struct {
		name    string
		letter  Letter
		rec     *Record
		force   bool
		wantID  string
		wantErr error
	}{
		{name: "first replay", letter: letter, wantID: "TEST:4:replay:1"},
		{name: "a replay's dead letter counts on", letter: withID, wantID: "greet-7:replay:3"},
		{name: "the identity the function saw", letter: recorded, wantID: "TEST@Ab3dEf9x:4:replay:1"},
		{name: "the identity the function saw, of a replay", letter: recordedReplay, wantID: "greet-7:replay:3"},
		{name: "replayed: refused", letter: letter, rec: &Record{State: StateReplayed, Attempt: 1}, wantErr: ErrAlreadyReplayed},
		{name: "replayed, forced: next attempt", letter: letter, rec: &Record{State: StateReplayed, Attempt: 1}, force: true, wantID: "TEST:4:replay:2"},
		{name: "forced past the ID's own count", letter: withID, rec: &Record{State: StateReplayed, Attempt: 5}, force: true, wantID: "greet-7:replay:6"},
		{name: "unconfirmed claim: same attempt", letter: letter, rec: &Record{State: StateClaimed, Attempt: 1}, wantID: "TEST:4:replay:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := planReplay(tt.letter, tt.rec, tt.force)
			if !errors.Is(err, tt.wantErr) || r.MsgID != tt.wantID {
				t.Fatalf("planReplay = %q, %v; want %q, %v", r.MsgID, err, tt.wantID, tt.wantErr)
			}
		})
	}
}

// TestInterruptedReplays covers the two crashes a replay can leave behind:
// after the publish but before the delete (the record says replayed, the
// dead letter remains: refused without --force), and after the claim with
// the publish unconfirmed (resumed under the same ID, which the stream
// deduplicates if the publish did land).
func TestInterruptedReplays(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, subject := range map[string]string{"TEST": "test.>", "DEADLETTER": "deadletter.>"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	deadLetter := func(origSeq string) uint64 {
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "deadletter.greeter", Data: []byte(`{}`), Header: nats.Header{
			wire.HeaderFunction: {"greeter"}, wire.HeaderOriginalSubject: {"test.in"},
			wire.HeaderOriginalStream: {"TEST"}, wire.HeaderStreamSequence: {origSeq}}})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	store, err := Open(ctx, js, manifest.DeadLetterSpec{Stream: "DEADLETTER", SubjectPrefix: "deadletter"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := openRecords(ctx, js, store.stream, true)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("replayed, not deleted", func(t *testing.T) {
		seq := deadLetter("1")
		if _, err := recs.put(ctx, recordKey("DEADLETTER", seq), nil, Record{State: StateReplayed, Attempt: 1, MsgID: "TEST:1:replay:1", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Replay(ctx, seq, ReplayOptions{}); !errors.Is(err, ErrAlreadyReplayed) {
			t.Fatalf("replay without --force = %v, want ErrAlreadyReplayed", err)
		}
		if _, err := store.Get(ctx, seq); err != nil {
			t.Fatalf("the refused dead letter: %v, want it kept", err)
		}
		r, err := store.Replay(ctx, seq, ReplayOptions{Force: true})
		if err != nil || r.MsgID != "TEST:1:replay:2" {
			t.Fatalf("forced replay = %+v, %v; want TEST:1:replay:2", r, err)
		}
		if _, err := store.Get(ctx, seq); !errors.Is(err, ErrNotFound) {
			t.Errorf("dead letter after the forced replay: %v, want deleted", err)
		}
	})
	t.Run("claimed, publish landed", func(t *testing.T) {
		seq := deadLetter("2")
		if _, err := recs.put(ctx, recordKey("DEADLETTER", seq), nil, Record{State: StateClaimed, Attempt: 1, MsgID: "TEST:2:replay:1", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		first, err := js.Publish(ctx, "test.in", []byte(`{}`), jetstream.WithMsgID("TEST:2:replay:1"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := store.Replay(ctx, seq, ReplayOptions{})
		if err != nil || r.MsgID != "TEST:2:replay:1" || !r.Duplicate || r.StoredSeq != first.Sequence {
			t.Fatalf("resumed replay = %+v, %v; want the same ID, deduplicated to sequence %d", r, err, first.Sequence)
		}
		rec, err := recs.get(ctx, recordKey("DEADLETTER", seq))
		if err != nil || rec.State != StateReplayed {
			t.Errorf("record after the resumed replay = %+v, %v; want replayed", rec, err)
		}
	})
	t.Run("concurrent claim", func(t *testing.T) {
		seq := deadLetter("3")
		key := recordKey("DEADLETTER", seq)
		if _, err := recs.put(ctx, key, nil, Record{State: StateClaimed, Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := recs.put(ctx, key, nil, Record{State: StateClaimed, Attempt: 1}); !errors.Is(err, ErrReplayConflict) {
			t.Errorf("second claim = %v, want ErrReplayConflict", err)
		}
	})
}
