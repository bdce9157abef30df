package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
	summarizesession "github.com/jetfn/jetfn/functions/summarize-session"
	"github.com/jetfn/jetfn/runtime"
)

// maxRounds is summarize-session's maxRounds in both variants.
const maxRounds = 5

// benchConversation is the conversation every benchmark session belongs to.
const benchConversation = "bench"

func sessionID(i int) string { return fmt.Sprintf("s%05d", i) }

// connectMongo opens the child's database; the returned close disconnects.
func connectMongo(ctx context.Context, spec childSpec) (*mongo.Database, func(), error) {
	client, err := mongo.Connect(options.Client().ApplyURI(spec.MongoURI))
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to mongo: %w", err)
	}
	return client.Database(spec.Database), func() { _ = client.Disconnect(context.Background()) }, nil
}

// startSessionRuntime runs summarize-session in the runtime.
func startSessionRuntime(ctx context.Context, nc *nats.Conn, spec childSpec) (func() error, error) {
	m, err := sessionManifest(spec.Concurrency, spec.Quiet)
	if err != nil {
		return nil, err
	}
	db, disconnect, err := connectMongo(ctx, spec)
	if err != nil {
		return nil, err
	}
	fns := []jetfn.Function{{Name: summarizesession.Name, New: summarizesession.New}}
	wait, err := startRuntime(ctx, nc, m, fns, runtime.WithMongo(db))
	if err != nil {
		disconnect()
		return nil, err
	}
	return func() error { defer disconnect(); return wait() }, nil
}

// startBare is the e2e baseline: the raw Consume loop doing
// summarize-session's Mongo and NATS calls by hand.
func startBare(ctx context.Context, nc *nats.Conn, spec childSpec) (func() error, error) {
	db, disconnect, err := connectMongo(ctx, spec)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		disconnect()
		return nil, err
	}
	s := bareSummarizer{js: js, quiet: spec.Quiet,
		segments: db.Collection(events.SegmentsCollection), summaries: db.Collection(events.SummariesCollection)}
	wait, err := startRaw(ctx, nc, sessionWorkload, spec.Concurrency, s.handle)
	if err != nil {
		disconnect()
		return nil, err
	}
	return func() error { defer disconnect(); return wait() }, nil
}

// bareSummarizer makes the calls summarize-session makes, in its order:
// count, wait quiet, recount (until two counts match), find sorted,
// InsertOne (on a duplicate key, the stored summary instead), publish with
// the summary's key as message ID. Its
// summary is a shorter computation than buildSummary's; both are
// microseconds against milliseconds of Mongo.
type bareSummarizer struct {
	js                  jetstream.JetStream
	quiet               time.Duration
	segments, summaries *mongo.Collection
}

func (s bareSummarizer) handle(ctx context.Context, m jetstream.Msg) error {
	var evt events.SessionEnded
	if err := json.Unmarshal(m.Data(), &evt); err != nil {
		return err
	}
	filter := bson.D{{Key: "conversationId", Value: evt.ConversationID}, {Key: "sessionId", Value: evt.SessionID}}
	if err := s.waitStable(ctx, filter); err != nil {
		return err
	}
	cur, err := s.segments.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "index", Value: 1}}))
	if err != nil {
		return err
	}
	var segs []events.Segment
	if err := cur.All(ctx, &segs); err != nil {
		return err
	}
	sum := summarize(evt, segs)
	if _, err := s.summaries.InsertOne(ctx, sum); mongo.IsDuplicateKeyError(err) {
		err = s.summaries.FindOne(ctx, bson.D{{Key: "_id", Value: sum.ID}}).Decode(&sum)
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return s.publish(ctx, sum)
}

func (s bareSummarizer) waitStable(ctx context.Context, filter bson.D) error {
	prev, err := s.segments.CountDocuments(ctx, filter)
	if err != nil {
		return err
	}
	for range maxRounds {
		time.Sleep(s.quiet)
		cur, err := s.segments.CountDocuments(ctx, filter)
		if err != nil || cur == prev {
			return err
		}
		prev = cur
	}
	return nil
}

func (s bareSummarizer) publish(ctx context.Context, sum events.Summary) error {
	data, err := json.Marshal(events.TranscriptProcessed{ConversationID: sum.ConversationID,
		SessionID: sum.SessionID, Segments: sum.Segments, Complete: sum.Complete})
	if err != nil {
		return err
	}
	_, err = s.js.Publish(ctx, events.TranscriptProcessedSubject, data, jetstream.WithMsgID(sum.ID))
	return err
}

func summarize(evt events.SessionEnded, segs []events.Segment) events.Summary {
	words := map[string]int{}
	var questions []string
	for _, seg := range segs {
		words[events.SpeakerKey(seg.Speaker)] += len(strings.Fields(seg.Text))
		if strings.HasSuffix(seg.Text, "?") {
			questions = append(questions, seg.Text)
		}
	}
	return events.Summary{
		ID:             events.SummaryKey(evt.ConversationID, evt.SessionID),
		ConversationID: evt.ConversationID, SessionID: evt.SessionID,
		Segments: len(segs), PublishedSegments: evt.PublishedSegments, Complete: len(segs) >= evt.PublishedSegments,
		WordsPerSpeaker: words, LongestTurns: []events.Turn{}, Questions: questions, UpdatedAt: time.Now(),
	}
}

var script = []struct{ speaker, text string }{
	{"Ana", "Morning, can everyone hear me?"},
	{"Ben", "Yes, loud and clear."},
	{"Ana", "Good. Let's go through the release plan."},
	{"Dr. Okafor", "Did the migration run on staging?"},
}

// seedSegments stores every session's segments once, as the transcriber
// would (_id is the segment key). Repetitions reuse them and start from an
// empty summaries collection (resetSummaries), so each does the same work.
func seedSegments(ctx context.Context, db *mongo.Database, sessions, perSession int) error {
	docs := make([]any, 0, sessions*perSession)
	for s := range sessions {
		for i := range perSession {
			line := script[i%len(script)]
			seg := events.Segment{ConversationID: benchConversation, SessionID: sessionID(s), Index: i,
				Speaker: line.speaker, Text: line.text, StartMs: int64(i) * 3000, EndMs: int64(i)*3000 + 2500}
			docs = append(docs, struct {
				ID             string `bson:"_id"`
				events.Segment `bson:",inline"`
			}{seg.Key(), seg})
		}
	}
	if _, err := db.Collection(events.SegmentsCollection).InsertMany(ctx, docs); err != nil {
		return fmt.Errorf("seeding segments: %w", err)
	}
	return nil
}

func resetSummaries(ctx context.Context, db *mongo.Database) error {
	if err := db.Collection(events.SummariesCollection).Drop(ctx); err != nil {
		return fmt.Errorf("dropping summaries: %w", err)
	}
	return nil
}

// sessionEnded is the i-th session's event.
func sessionEnded(i, segments int) []byte {
	data, _ := json.Marshal(events.SessionEnded{ConversationID: benchConversation,
		SessionID: sessionID(i), PublishedSegments: segments})
	return data
}
