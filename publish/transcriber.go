package publish

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/events"
)

// SaveTimeout bounds one segment write to Mongo, so a database outage
// delays the transcriber by at most this long per segment.
const SaveTimeout = 5 * time.Second

// Transcriber is what the transcriber service calls: it saves each finished
// segment to Mongo and publishes it, and announces the end of a session.
// With a no-op Client (no NATS_URL) it still saves segments and publishes
// nothing. It is safe to use from many goroutines.
type Transcriber struct {
	client   *Client
	segments *mongo.Collection
}

// NewTranscriber returns a Transcriber that saves to db's
// transcriptsegments collection and publishes through client.
func NewTranscriber(client *Client, db *mongo.Database) (*Transcriber, error) {
	if db == nil {
		return nil, ErrNoDatabase
	}
	return &Transcriber{client: client, segments: db.Collection(events.SegmentsCollection)}, nil
}

// SaveSegment stores seg (an upsert on its key, so saving it again is
// harmless) and then publishes it to transcription.segment with the same
// key as Nats-Msg-Id. A segment breaking the contract is refused before
// either step. A publish error is returned after the segment is saved; the
// caller may retry the whole call.
func (t *Transcriber) SaveSegment(ctx context.Context, seg events.Segment) error {
	data, err := events.SegmentPayload.Encode(seg)
	if err != nil {
		return fmt.Errorf("saving segment %s: %w", seg.Key(), err)
	}
	if err := t.save(ctx, seg); err != nil {
		return err
	}
	return t.client.publish(ctx, events.SegmentSubject, seg.Key(), bytesOf(data))
}

func (t *Transcriber) save(ctx context.Context, seg events.Segment) error {
	ctx, cancel := context.WithTimeout(ctx, SaveTimeout)
	defer cancel()
	doc := struct {
		ID             string `bson:"_id"`
		events.Segment `bson:",inline"`
	}{seg.Key(), seg}
	_, err := t.segments.ReplaceOne(ctx, bson.D{{Key: "_id", Value: doc.ID}}, doc, options.Replace().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("saving segment %s: %w", seg.Key(), err)
	}
	return nil
}

// SessionEnded publishes transcription.session-ended for a session whose
// transcriber saved published segments (late ones still on their way
// count too). Its Nats-Msg-Id is events.SessionEndedKey, so a retry is
// dropped by the stream.
func (t *Transcriber) SessionEnded(ctx context.Context, conversationID, sessionID string, published int) error {
	evt := events.SessionEnded{ConversationID: conversationID, SessionID: sessionID, PublishedSegments: published}
	data, err := events.SessionEndedPayload.Encode(evt)
	if err != nil {
		return fmt.Errorf("ending session %s: %w", sessionID, err)
	}
	return t.client.publish(ctx, events.SessionEndedSubject, events.SessionEndedKey(conversationID, sessionID), bytesOf(data))
}
