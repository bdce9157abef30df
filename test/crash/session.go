package crash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/test/testkit"
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

// readWithin bounds the retries of a read the harness makes once rather
// than polls (testkit.Retry): right after a nats-server restart it can
// meet "no responders" while the harness's connection comes back.
const readWithin = time.Minute

// nextSeq is the sequence the next message stored in stream will get.
func nextSeq(ctx context.Context, js jetstream.JetStream, name string) (uint64, error) {
	var next uint64
	err := testkit.Retry(ctx, readWithin, "reading stream "+name, func(ctx context.Context) error {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		next = s.CachedInfo().State.LastSeq + 1
		return nil
	})
	return next, err
}

// storedMsgs reads the messages on subject that stream holds from sequence
// from up to its last sequence at the time of the call. A sequence the
// server no longer has is skipped.
func storedMsgs(ctx context.Context, js jetstream.JetStream, stream, subject string, from uint64) ([]*jetstream.RawStreamMsg, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	state := s.CachedInfo().State // js.Stream has just fetched it
	var out []*jetstream.RawStreamMsg
	for seq := max(from, state.FirstSeq); seq <= state.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.Subject == subject {
			out = append(out, m)
		}
	}
	return out, nil
}

// consumerInfo is summarize-session's durable consumer as the server sees it.
func consumerInfo(ctx context.Context, js jetstream.JetStream) (*jetstream.ConsumerInfo, error) {
	return durableInfo(ctx, js, transcriptionStream, functionName)
}

// durableInfo is the durable consumer of function (named after it) on
// stream, as the server sees it.
func durableInfo(ctx context.Context, js jetstream.JetStream, stream, function string) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(ctx, stream, function)
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
