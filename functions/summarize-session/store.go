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

// saveSummary replaces the session's summary, creating it the first time.
// A replace, never an insert: a second run for the same session overwrites
// the first summary instead of adding another.
//
// Two runs for one session (session-ended published twice) can upsert at
// the same moment; both miss the document, both insert, and the loser gets
// a duplicate-key error. Its retry finds the document and replaces it, so
// it is retried here at once rather than after the manifest's backoff.
func (s store) saveSummary(ctx context.Context, sum events.Summary) error {
	err := s.replaceSummary(ctx, sum)
	if mongo.IsDuplicateKeyError(err) {
		err = s.replaceSummary(ctx, sum)
	}
	if err != nil {
		return fmt.Errorf("saving summary %s: %w", sum.ID, err)
	}
	return nil
}

func (s store) replaceSummary(ctx context.Context, sum events.Summary) error {
	opts := options.Replace().SetUpsert(true)
	_, err := s.summaries.ReplaceOne(ctx, bson.D{{Key: "_id", Value: sum.ID}}, sum, opts)
	return err
}
