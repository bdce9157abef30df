package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/events"
)

// session is one transcript session the harness feeds to summarize-session.
type session struct {
	conversationID, sessionID string
	segments                  int
}

func (s session) key() string { return events.SummaryKey(s.conversationID, s.sessionID) }

// segmentDoc is a stored segment: the transcriber's document with its _id.
type segmentDoc struct {
	ID             string `bson:"_id"`
	events.Segment `bson:",inline"`
}

// seed stores the session's segments, as the transcriber would before it
// publishes session-ended.
func seed(ctx context.Context, db *mongo.Database, s session) error {
	if s.segments == 0 {
		return nil
	}
	docs := make([]any, 0, s.segments)
	speakers := []string{"Ana", "Ben"}
	for i := range s.segments {
		seg := events.Segment{
			ConversationID: s.conversationID, SessionID: s.sessionID, Index: i,
			Speaker: speakers[i%2], Text: fmt.Sprintf("segment %d, is it stored once?", i),
			StartMs: int64(i) * 1000, EndMs: int64(i)*1000 + 900,
		}
		docs = append(docs, segmentDoc{ID: seg.Key(), Segment: seg})
	}
	if _, err := db.Collection(events.SegmentsCollection).InsertMany(ctx, docs); err != nil {
		return fmt.Errorf("seeding segments of %s: %w", s.key(), err)
	}
	return nil
}

// publishEnded publishes the session's transcription.session-ended straight
// to the server, with the transcriber's message ID.
func publishEnded(ctx context.Context, js jetstream.JetStream, s session) error {
	data, err := json.Marshal(events.SessionEnded{
		ConversationID: s.conversationID, SessionID: s.sessionID, PublishedSegments: s.segments,
	})
	if err != nil {
		return err
	}
	_, err = js.Publish(ctx, events.SessionEndedSubject, data,
		jetstream.WithMsgID(events.SessionEndedKey(s.conversationID, s.sessionID)))
	if err != nil {
		return fmt.Errorf("publishing session-ended of %s: %w", s.key(), err)
	}
	return nil
}

// summaries counts the summary documents of a session. It filters on the
// session's fields, not on _id: a summary stored under any other _id would
// be a duplicate too.
func summaries(ctx context.Context, db *mongo.Database, s session) (int, error) {
	filter := bson.D{{Key: "conversationId", Value: s.conversationID}, {Key: "sessionId", Value: s.sessionID}}
	n, err := db.Collection(events.SummariesCollection).CountDocuments(ctx, filter)
	return int(n), err
}

// summaryCounts counts the summary documents of every session in db, by key.
func summaryCounts(ctx context.Context, db *mongo.Database) (map[string]int, error) {
	cur, err := db.Collection(events.SummariesCollection).Find(ctx, bson.D{})
	if err != nil {
		return nil, err
	}
	var docs []struct {
		ConversationID string `bson:"conversationId"`
		SessionID      string `bson:"sessionId"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, d := range docs {
		counts[events.SummaryKey(d.ConversationID, d.SessionID)]++
	}
	return counts, nil
}

// notification is one transcript.processed message stored in the stream.
type notification struct {
	key    string
	seq    uint64
	stored time.Time
}

// scanNotifications reads every transcript.processed message stored from
// stream sequence from on, with a short-lived ephemeral consumer.
func scanNotifications(ctx context.Context, js jetstream.JetStream, from uint64) ([]notification, error) {
	stream, err := js.Stream(ctx, transcriptionStream)
	if err != nil {
		return nil, err
	}
	c, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     events.TranscriptProcessedSubject,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       max(from, 1),
		InactiveThreshold: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name) }()
	pending := int(c.CachedInfo().NumPending)
	var out []notification
	for len(out) < pending {
		batch, err := c.Fetch(pending-len(out), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			n, err := toNotification(m)
			if err != nil {
				return nil, err
			}
			out = append(out, n)
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if got == 0 {
			return nil, fmt.Errorf("scanning notifications: %d of %d read", len(out), pending)
		}
	}
	return out, nil
}

func toNotification(m jetstream.Msg) (notification, error) {
	meta, err := m.Metadata()
	if err != nil {
		return notification{}, err
	}
	var evt events.TranscriptProcessed
	if err := json.Unmarshal(m.Data(), &evt); err != nil {
		return notification{}, fmt.Errorf("decoding transcript.processed #%d: %w", meta.Sequence.Stream, err)
	}
	return notification{key: events.SummaryKey(evt.ConversationID, evt.SessionID),
		seq: meta.Sequence.Stream, stored: meta.Timestamp}, nil
}

// nextSeq is the sequence the next message stored in stream will get.
func nextSeq(ctx context.Context, js jetstream.JetStream, name string) (uint64, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq + 1, nil
}

// consumerInfo is the function's durable consumer as the server sees it.
func consumerInfo(ctx context.Context, js jetstream.JetStream) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(ctx, transcriptionStream, functionName)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// settled reports whether the consumer has nothing pending: every message
// it was given has been acked (or terminated).
func settled(info *jetstream.ConsumerInfo) bool {
	return info.NumAckPending == 0 && info.NumPending == 0
}
