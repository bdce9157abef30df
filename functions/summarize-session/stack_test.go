package summarizesession_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
	summarizesession "github.com/jetfn/jetfn/functions/summarize-session"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/publish"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// stack is an embedded nats-server, a database and a runtime running
// summarize-session, plus a transcriber to feed it.
type stack struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
	db *mongo.Database
	tr *publish.Transcriber
}

// testManifest is the summarize-session entry the tests run, with the quiet
// period and any further spec lines given.
func testManifest(t *testing.T, quiet time.Duration, extra string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse([]byte(`
streams:
  - name: TRANSCRIPTION
    subjects: ["transcription.>", "transcript.>"]
    duplicates: 24h
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: summarize-session
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.session-ended
    ackWait: 6s
    heartbeat: 2s
    concurrency: 4
    timeout: 60s
    outputs:
      - subject: transcript.processed
        stream: TRANSCRIPTION
    config:
      quiet: ` + quiet.String() + `
      maxRounds: 5
` + extra))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testLogger() *slog.Logger {
	level := slog.LevelError + 1
	if os.Getenv("JETFN_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// testDB is a database of its own for this test on a fresh FerretDB.
func testDB(t *testing.T) *mongo.Database {
	t.Helper()
	_, client := runtimetest.StartMongo(t)
	return client.Database(dbName(t))
}

func dbName(t *testing.T) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
}

// startStack starts NATS and the runtime with m, and waits until it is ready.
func startStack(t *testing.T, db *mongo.Database, m *manifest.Manifest) *stack {
	t.Helper()
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	fns := []jetfn.Function{{Name: summarizesession.Name, New: summarizesession.New}}
	rt, err := runtime.New(nc, m, fns, runtime.WithMongo(db), runtime.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
	client, err := publish.Connect(ns.ClientURL(), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	tr, err := publish.NewTranscriber(client, db)
	if err != nil {
		t.Fatal(err)
	}
	return &stack{t: t, nc: nc, js: js, db: db, tr: tr}
}

var script = []struct{ speaker, text string }{
	{"Ana", "Morning, can everyone hear me?"},
	{"Ben", "Yes, loud and clear."},
	{"Ana", "Good. Let's go through the release plan."},
	{"Ana", "The build is green since yesterday."},
	{"Dr. Okafor", "Did the migration run on staging?"},
	{"Ben", "It did, no errors."},
}

// save stores and publishes the session's segments with these indexes. A
// save that fails (a loaded machine can stall a FerretDB write past
// publish.SaveTimeout) is tried again for up to saveRetryFor, as a
// transcriber would: the upsert and the message ID make that harmless.
func (s *stack) save(conv, sess string, indexes ...int) {
	s.t.Helper()
	for _, i := range indexes {
		line := script[i%len(script)]
		seg := events.Segment{ConversationID: conv, SessionID: sess, Index: i, Speaker: line.speaker,
			Text: line.text, StartMs: int64(i) * 3000, EndMs: int64(i)*3000 + 2500}
		runtimetest.Eventually(s.t, saveRetryFor, fmt.Sprintf("segment %d saved", i), func() bool {
			err := s.tr.SaveSegment(context.Background(), seg)
			if err != nil {
				s.t.Logf("saving segment %d: %v; trying again", i, err)
			}
			return err == nil
		})
	}
}

// saveRetryFor bounds how long save tries one segment.
const saveRetryFor = 30 * time.Second

func (s *stack) sessionEnded(conv, sess string, published int) {
	s.t.Helper()
	if err := s.tr.SessionEnded(context.Background(), conv, sess, published); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) summaries(conv, sess string) []events.Summary {
	s.t.Helper()
	out, err := s.findSummaries(conv, sess)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *stack) findSummaries(conv, sess string) ([]events.Summary, error) {
	cur, err := s.db.Collection(events.SummariesCollection).Find(context.Background(),
		bson.D{{Key: "conversationId", Value: conv}, {Key: "sessionId", Value: sess}})
	if err != nil {
		return nil, err
	}
	var out []events.Summary
	err = cur.All(context.Background(), &out)
	return out, err
}

// processed returns every transcript.processed message the stream stored
// for the session.
func (s *stack) processed(conv, sess string) []*jetstream.RawStreamMsg {
	s.t.Helper()
	var out []*jetstream.RawStreamMsg
	for _, m := range runtimetest.StreamMessages(s.t, s.js, "TRANSCRIPTION") {
		var evt events.TranscriptProcessed
		if m.Subject == events.TranscriptProcessedSubject && json.Unmarshal(m.Data, &evt) == nil &&
			evt.ConversationID == conv && evt.SessionID == sess {
			out = append(out, m)
		}
	}
	return out
}

// status asks the function's status endpoint for its counters.
func (s *stack) status() wire.Stats {
	s.t.Helper()
	reply, err := s.nc.Request(manifest.StatusSubject(summarizesession.Name), nil, 5*time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	var st wire.Stats
	if err := json.Unmarshal(reply.Data, &st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// settled reports whether the consumer delivered at least n messages and
// has none pending or waiting for an ack.
func (s *stack) settled(n uint64) bool {
	s.t.Helper()
	c, err := s.js.Consumer(context.Background(), "TRANSCRIPTION", summarizesession.Name)
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream >= n
}

// awaitOneSummary waits until the session has a summary and returns it,
// failing if there is more than one.
func (s *stack) awaitOneSummary(conv, sess string) events.Summary {
	s.t.Helper()
	runtimetest.Eventually(s.t, 60*time.Second, "summary of "+sess, func() bool {
		sums, err := s.findSummaries(conv, sess) // Mongo may be coming back
		return err == nil && len(sums) > 0
	})
	sums := s.summaries(conv, sess)
	if len(sums) != 1 {
		s.t.Fatalf("%d summaries for %s, want 1", len(sums), sess)
	}
	return sums[0]
}
