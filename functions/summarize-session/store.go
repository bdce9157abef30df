package summarizesession

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/events"
)

// store reads the transcriber's segments and writes summaries. Every error
// is a plain one: the runtime retries it with the manifest's backoff.
type store struct {
	segments  *mongo.Collection
	summaries *mongo.Collection
}

func newStore(db *mongo.Database) store {
	return store{
		segments:  db.Collection(events.SegmentsCollection),
		summaries: db.Collection(events.SummariesCollection),
	}
}

func sessionFilter(evt events.SessionEnded) bson.D {
	return bson.D{{Key: "conversationId", Value: evt.ConversationID}, {Key: "sessionId", Value: evt.SessionID}}
}

func (s store) countSegments(ctx context.Context, evt events.SessionEnded) (int, error) {
	n, err := s.segments.CountDocuments(ctx, sessionFilter(evt))
	if err != nil {
		return 0, fmt.Errorf("counting segments: %w", err)
	}
	return int(n), nil
}

// loadSegments returns the session's segments in index order.
func (s store) loadSegments(ctx context.Context, evt events.SessionEnded) ([]events.Segment, error) {
	opts := options.Find().SetSort(bson.D{{Key: "index", Value: 1}})
	cur, err := s.segments.Find(ctx, sessionFilter(evt), opts)
	if err != nil {
		return nil, fmt.Errorf("loading segments: %w", err)
	}
	segs := []events.Segment{}
	if err := cur.All(ctx, &segs); err != nil {
		return nil, fmt.Errorf("loading segments: %w", err)
	}
	return segs, nil
}

// saveSummary stores sum unless the session has a summary already, and
// returns the session's summary: sum, or the one stored first. The first
// committed summary is the session's for good, because the first
// transcript.processed announced it and a later one under the same
// message ID is dropped by the stream; replacing the summary would leave
// the stored document and the announcement disagreeing (a later run sees
// segments that arrived since). Two runs at once both insert; the loser's
// duplicate-key error tells it to read the winner's.
func (s store) saveSummary(ctx context.Context, sum events.Summary) (events.Summary, error) {
	_, err := s.summaries.InsertOne(ctx, sum)
	if err == nil {
		return sum, nil
	}
	if !mongo.IsDuplicateKeyError(err) {
		return sum, fmt.Errorf("saving summary %s: %w", sum.ID, err)
	}
	var stored events.Summary
	if err := s.summaries.FindOne(ctx, bson.D{{Key: "_id", Value: sum.ID}}).Decode(&stored); err != nil {
		return sum, fmt.Errorf("reading summary %s: %w", sum.ID, err)
	}
	return stored, nil
}
