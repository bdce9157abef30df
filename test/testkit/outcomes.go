package testkit

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
)

// SummaryCounts counts the summary documents of every session in db, by key.
func SummaryCounts(ctx context.Context, db *mongo.Database) (map[string]int, error) {
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

// Notification is one transcript.processed message stored in the stream.
type Notification struct {
	Key    string // events.SummaryKey of the session it announces
	Stored time.Time
}

// ScanNotifications reads every transcript.processed message stored in
// stream from sequence from on. It makes one attempt: a caller that reads
// once, rather than polling, wraps it in Retry.
func ScanNotifications(ctx context.Context, js jetstream.JetStream, stream string, from uint64) ([]Notification, error) {
	return Scan(ctx, js, stream, events.TranscriptProcessedSubject, from, toNotification)
}

// Scan reads every message of stream on filter from sequence from on, in
// stream order, with a short-lived ephemeral consumer, converting each
// with convert. It makes one attempt; a fetch that brings nothing while
// messages are pending is ErrScanStalled, which Retry starts over.
func Scan[T any](ctx context.Context, js jetstream.JetStream, stream, filter string, from uint64, convert func(jetstream.Msg) (T, error)) ([]T, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       max(from, 1),
		InactiveThreshold: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name) }()
	pending := int(c.CachedInfo().NumPending)
	var out []T
	for len(out) < pending {
		batch, err := c.Fetch(pending-len(out), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			v, err := convert(m)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if got == 0 {
			return nil, fmt.Errorf("scanning %s on %s: %d of %d read: %w", filter, stream, len(out), pending, ErrScanStalled)
		}
	}
	return out, nil
}

// EachStored calls fn for every message stored on stream, in order, read
// one by one by sequence (no consumer), so it sees what a consumer would
// have skipped; it stops at fn's first error.
func EachStored(ctx context.Context, js jetstream.JetStream, stream string, fn func(*jetstream.RawStreamMsg) error) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	st := s.CachedInfo().State
	for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s #%d: %w", stream, seq, err)
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

func toNotification(m jetstream.Msg) (Notification, error) {
	meta, err := m.Metadata()
	if err != nil {
		return Notification{}, err
	}
	var evt events.TranscriptProcessed
	if err := json.Unmarshal(m.Data(), &evt); err != nil {
		return Notification{}, fmt.Errorf("decoding transcript.processed #%d: %w", meta.Sequence.Stream, err)
	}
	return Notification{Key: events.SummaryKey(evt.ConversationID, evt.SessionID),
		Stored: meta.Timestamp}, nil
}

// SubjectCount is how many messages on subject the stream holds.
func SubjectCount(ctx context.Context, js jetstream.JetStream, stream, subject string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, err
	}
	return info.State.Subjects[subject], nil
}
