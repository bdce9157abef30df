package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/test/testkit"
)

// Names the tests' manifests declare.
const (
	transcriptionStream = "TRANSCRIPTION"
	deadLetterStream    = "DEADLETTER"
	durable             = "summarize-session"
)

// session is one transcript session fed to summarize-session.
type session struct {
	conv, sess string
	segments   int
}

func (s session) key() string { return events.SummaryKey(s.conv, s.sess) }

// newSessions makes n sessions whose IDs start with prefix. One in five has
// two segments, the others none: FerretDB (SQLite) answers every count and
// find of a session's segments with a scan of the whole collection (about
// 65µs a document on this machine, with or without an index), so a bigger
// collection would measure FerretDB rather than the runtime.
func newSessions(prefix string, n int) []session {
	ss := make([]session, n)
	for i := range ss {
		ss[i] = newSession(prefix, i)
	}
	return ss
}

func newSession(prefix string, i int) session {
	segments := 0
	if i%5 == 0 {
		segments = 2
	}
	return session{conv: fmt.Sprintf("conv-%s-%03d", prefix, i/10), sess: fmt.Sprintf("%s-%05d", prefix, i), segments: segments}
}

// segmentDoc is a stored segment as the transcriber writes it.
type segmentDoc struct {
	ID             string `bson:"_id"`
	events.Segment `bson:",inline"`
}

func segmentDocs(s session) []any {
	docs := make([]any, 0, s.segments)
	for i := range s.segments {
		seg := events.Segment{ConversationID: s.conv, SessionID: s.sess, Index: i,
			Speaker: []string{"Ana", "Ben"}[i%2], Text: fmt.Sprintf("segment %d, stored once?", i),
			StartMs: int64(i) * 1000, EndMs: int64(i)*1000 + 900}
		docs = append(docs, segmentDoc{ID: seg.Key(), Segment: seg})
	}
	return docs
}

// seed stores every session's segments, as the transcriber does before it
// publishes session-ended. Unordered, so a retry after a partial insert
// stores the rest and reports the duplicates, which are ignored.
func seed(ctx context.Context, db *mongo.Database, ss []session) error {
	var docs []any
	for _, s := range ss {
		docs = append(docs, segmentDocs(s)...)
	}
	coll := db.Collection(events.SegmentsCollection)
	for len(docs) > 0 {
		chunk := docs[:min(500, len(docs))]
		docs = docs[len(chunk):]
		_, err := coll.InsertMany(ctx, chunk, options.InsertMany().SetOrdered(false))
		if err != nil && !mongo.IsDuplicateKeyError(err) {
			return fmt.Errorf("seeding segments: %w", err)
		}
	}
	return nil
}

// publishAll publishes every session's session-ended asynchronously, then
// publishes again, one by one with retries, those whose acknowledgement
// did not come: the message ID drops any that were stored after all.
func publishAll(ctx context.Context, js jetstream.JetStream, ss []session) error {
	futures := make([]jetstream.PubAckFuture, len(ss))
	for i, s := range ss {
		data, err := json.Marshal(events.SessionEnded{ConversationID: s.conv, SessionID: s.sess, PublishedSegments: s.segments})
		if err != nil {
			return err
		}
		f, err := js.PublishAsync(events.SessionEndedSubject, data, jetstream.WithMsgID(events.SessionEndedKey(s.conv, s.sess)))
		if err == nil {
			futures[i] = f
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
	}
	for i, f := range futures {
		if f != nil {
			select {
			case <-f.Ok():
				continue
			default:
			}
		}
		if _, err := publishEnded(ctx, js, ss[i]); err != nil {
			return err
		}
	}
	return nil
}

// publishEnded publishes the session's session-ended with the transcriber's
// message ID, retrying until the stream stores it or ctx is done: during an
// election a publish can fail or time out, and the message ID makes a retry
// of a publish that was in fact stored a no-op. It returns the retries made.
func publishEnded(ctx context.Context, js jetstream.JetStream, s session) (int, error) {
	data, err := json.Marshal(events.SessionEnded{ConversationID: s.conv, SessionID: s.sess, PublishedSegments: s.segments})
	if err != nil {
		return 0, err
	}
	for retries := 0; ; retries++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(pctx, events.SessionEndedSubject, data, jetstream.WithMsgID(events.SessionEndedKey(s.conv, s.sess)))
		cancel()
		if err == nil {
			return retries, nil
		}
		select {
		case <-ctx.Done():
			return retries, fmt.Errorf("publishing session-ended of %s: %w (last error: %v)", s.key(), ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settled reports whether the function's consumer has nothing left: no
// message pending and none delivered without an ack.
func settled(ctx context.Context, js jetstream.JetStream) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, transcriptionStream, durable)
	if err != nil {
		return false
	}
	info := c.CachedInfo()
	return info.NumPending == 0 && info.NumAckPending == 0
}

// waitSettled waits until the stream holds at least want notifications and
// the consumer has settled every message.
func waitSettled(ctx context.Context, js jetstream.JetStream, want int) error {
	return poll(ctx, 100*time.Millisecond, fmt.Sprintf("%d notifications and a settled consumer", want), func() bool {
		n, err := testkit.SubjectCount(ctx, js, transcriptionStream, events.TranscriptProcessedSubject)
		return err == nil && n >= uint64(want) && settled(ctx, js)
	})
}

// readWithin bounds the retries of a read a test makes once rather than
// polls (testkit.Retry): its 2s request timeout, or an election after a
// failover, must not fail the test on a loaded machine.
const readWithin = time.Minute

// notificationCount is how many transcript.processed messages the stream
// holds, read once with retries.
func notificationCount(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	var n uint64
	err := testkit.Retry(ctx, readWithin, "counting notifications", func(ctx context.Context) error {
		var err error
		n, err = testkit.SubjectCount(ctx, js, transcriptionStream, events.TranscriptProcessedSubject)
		return err
	})
	return n, err
}

// notificationCounts reads every transcript.processed message in the
// stream and counts them per summary key.
func notificationCounts(ctx context.Context, js jetstream.JetStream) (map[string]int, error) {
	notes, err := testkit.ScanNotifications(ctx, js, transcriptionStream, 1)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, n := range notes {
		counts[n.Key]++
	}
	return counts, nil
}

// tally is the exactly-once verdict over a set of sessions.
type tally struct {
	Sessions                       int
	NoSummary, DuplicateSummary    int
	NoNotification, DuplicateNotes int
	Missing                        []string // a few keys, for the failure message
}

func (t tally) ok() bool {
	return t.NoSummary+t.DuplicateSummary+t.NoNotification+t.DuplicateNotes == 0
}

func (t tally) String() string {
	s := fmt.Sprintf("%d sessions: lost summaries %d, duplicate summaries %d, lost notifications %d, duplicate notifications %d",
		t.Sessions, t.NoSummary, t.DuplicateSummary, t.NoNotification, t.DuplicateNotes)
	if len(t.Missing) > 0 {
		s += " (e.g. " + strings.Join(t.Missing, ", ") + ")"
	}
	return s
}

// check counts, for every session, its summaries and notifications.
func check(ctx context.Context, js jetstream.JetStream, db *mongo.Database, ss []session) (tally, error) {
	sums, err := testkit.SummaryCounts(ctx, db)
	if err != nil {
		return tally{}, fmt.Errorf("counting summaries: %w", err)
	}
	notes, err := notificationCounts(ctx, js)
	if err != nil {
		return tally{}, fmt.Errorf("counting notifications: %w", err)
	}
	t := tally{Sessions: len(ss)}
	for _, s := range ss {
		k := s.key()
		switch n := sums[k]; {
		case n == 0:
			t.NoSummary++
		case n > 1:
			t.DuplicateSummary++
		}
		switch n := notes[k]; {
		case n == 0:
			t.NoNotification++
		case n > 1:
			t.DuplicateNotes++
		}
		if (sums[k] != 1 || notes[k] != 1) && len(t.Missing) < 5 {
			t.Missing = append(t.Missing, fmt.Sprintf("%s(sum %d, note %d)", k, sums[k], notes[k]))
		}
	}
	return t, nil
}

// deadLettered is how many messages the dead-letter stream holds.
func deadLettered(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	s, err := js.Stream(ctx, deadLetterStream)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.Msgs, nil
}

// poll calls cond every interval until it holds or ctx is done.
func poll(ctx context.Context, interval time.Duration, what string, cond func() bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
