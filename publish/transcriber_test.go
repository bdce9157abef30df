package publish_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/publish"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

func transcriberDB(t *testing.T) *mongo.Database {
	t.Helper()
	_, client := runtimetest.StartMongo(t)
	return client.Database(strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
}

// transcriptionStream creates the TRANSCRIPTION stream as the runtime's
// manifest declares it.
func transcriptionStream(t *testing.T, js jetstream.JetStream) jetstream.Stream {
	t.Helper()
	s, err := js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{
		Name: "TRANSCRIPTION", Subjects: []string{"transcription.>", "transcript.>"}, Duplicates: 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newTranscriber(t *testing.T, url string, db *mongo.Database, log *slog.Logger) *publish.Transcriber {
	t.Helper()
	client, err := publish.Connect(url, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	tr, err := publish.NewTranscriber(client, db)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func segment(index int) events.Segment {
	return events.Segment{ConversationID: "c1", SessionID: "s1", Index: index, Speaker: "Ana",
		Text: "Can you hear me?", StartMs: int64(index) * 1000, EndMs: int64(index)*1000 + 900}
}

func storedSegments(t *testing.T, db *mongo.Database) []bson.M {
	t.Helper()
	cur, err := db.Collection(events.SegmentsCollection).Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.M
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestTranscriberWithoutNATS: no NATS_URL means segments are still saved,
// nothing is published, and one debug line says so.
func TestTranscriberWithoutNATS(t *testing.T) {
	var logs runtimetest.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	db := transcriberDB(t)
	tr := newTranscriber(t, "", db, log)
	ctx := context.Background()
	for i := range 2 {
		if err := tr.SaveSegment(ctx, segment(i)); err != nil {
			t.Fatalf("SaveSegment: %v", err)
		}
	}
	if err := tr.SessionEnded(ctx, "c1", "s1", 2); err != nil {
		t.Fatalf("SessionEnded: %v", err)
	}
	if got := len(storedSegments(t, db)); got != 2 {
		t.Errorf("stored %d segments, want 2", got)
	}
	if got := strings.Count(logs.String(), "\n"); got != 1 || !strings.Contains(logs.String(), "NATS_URL") {
		t.Errorf("log = %q, want one line about NATS_URL", logs.String())
	}
}

// TestTranscriberDuplicatesDropped: a publisher retry stores nothing twice,
// in Mongo or in the stream, and what is stored matches the schemas.
func TestTranscriberDuplicatesDropped(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	stream := transcriptionStream(t, js)
	db := transcriberDB(t)
	tr := newTranscriber(t, ns.ClientURL(), db, nil)
	ctx := context.Background()
	for range 2 {
		if err := tr.SaveSegment(ctx, segment(0)); err != nil {
			t.Fatalf("SaveSegment: %v", err)
		}
		if err := tr.SessionEnded(ctx, "c1", "s1", 1); err != nil {
			t.Fatalf("SessionEnded: %v", err)
		}
	}
	docs := storedSegments(t, db)
	if len(docs) != 1 || docs[0]["_id"] != "s1:0" || docs[0]["text"] != "Can you hear me?" {
		t.Errorf("stored %v, want one segment with _id s1:0", docs)
	}
	tests := []struct {
		name    string
		subject string
		schema  string
		wantID  string
	}{
		{name: "segment", subject: events.SegmentSubject, schema: "segment.schema.json", wantID: "s1:0"},
		{name: "session ended", subject: events.SessionEndedSubject, schema: "session-ended.schema.json", wantID: "c1:s1:ended"},
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter("transcription.>"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if got := info.State.Subjects[tt.subject]; got != 1 {
			t.Errorf("%s: stream holds %d messages, want 1", tt.name, got)
		}
		msg, err := stream.GetLastMsgForSubject(ctx, tt.subject)
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.Header.Get(jetstream.MsgIDHeader); got != tt.wantID {
			t.Errorf("%s: Nats-Msg-Id %q, want %q", tt.name, got, tt.wantID)
		}
		if err := validateAgainst(t, tt.schema, msg.Data); err != nil {
			t.Errorf("%s: stored payload %s breaks the schema: %v", tt.name, msg.Data, err)
		}
	}
}

func validateAgainst(t *testing.T, schema string, data []byte) error {
	t.Helper()
	s, err := events.CompileSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}

// TestTranscriberNATSDown: with the server gone, a publish fails within the
// client's bounded timeout, returns its error and does not panic; the
// segment is still saved.
func TestTranscriberNATSDown(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	transcriptionStream(t, js)
	db := transcriberDB(t)
	var logs runtimetest.LogBuffer
	tr := newTranscriber(t, ns.ClientURL(), db, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	if err := tr.SaveSegment(ctx, segment(0)); err != nil {
		t.Fatalf("SaveSegment with NATS up: %v", err)
	}
	devstack.StopNATS(ns)
	// A segment's call is bounded by its save's timeout and its publish's;
	// session-ended publishes only.
	tests := []struct {
		name  string
		call  func() error
		limit time.Duration
	}{
		{name: "segment", call: func() error { return tr.SaveSegment(ctx, segment(1)) }, limit: publish.SaveTimeout + publish.DefaultTimeout},
		{name: "session ended", call: func() error { return tr.SessionEnded(ctx, "c1", "s1", 2) }, limit: publish.DefaultTimeout + time.Second},
	}
	for _, tt := range tests {
		start := time.Now()
		err := tt.call()
		took := time.Since(start)
		t.Logf("%s: publish with NATS down returned after %s: %v", tt.name, took, err)
		if err == nil {
			t.Errorf("%s: publish with NATS down returned nil", tt.name)
		}
		if took > tt.limit {
			t.Errorf("%s: blocked the caller %s, want at most %s", tt.name, took, tt.limit)
		}
	}
	if got := len(storedSegments(t, db)); got != 2 {
		t.Errorf("stored %d segments, want 2: a NATS outage must not stop the save", got)
	}
	if got := strings.Count(logs.String(), "publishing event"); got != 2 {
		t.Errorf("logged %d failed publishes, want 2:\n%s", got, logs.String())
	}
}

// TestTranscriberRefusesBadInput: a payload breaking the contract is never
// saved or published.
func TestTranscriberRefusesBadInput(t *testing.T) {
	db := transcriberDB(t)
	tr := newTranscriber(t, "", db, nil)
	ctx := context.Background()
	bad := segment(0)
	bad.SessionID = "s.1"
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "segment", err: tr.SaveSegment(ctx, bad),
			want: `saving segment s.1:0: payload: sessionId: must not contain '.' (got "s.1")`},
		{name: "session ended", err: tr.SessionEnded(ctx, "c 1", "s1", -1),
			want: `ending session s1: payload: conversationId: must not contain ' ' (got "c 1"); publishedSegments: want at least 0, got -1`},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %s", tt.name, tt.err, tt.want)
		}
	}
	if got := len(storedSegments(t, db)); got != 0 {
		t.Errorf("stored %d segments, want 0", got)
	}
	if _, err := publish.NewTranscriber(nil, nil); !errors.Is(err, publish.ErrNoDatabase) {
		t.Errorf("NewTranscriber(nil, nil) = %v, want ErrNoDatabase", err)
	}
}
