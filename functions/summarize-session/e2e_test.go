package summarizesession_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/events"
	summarizesession "github.com/jetfn/jetfn/functions/summarize-session"
	"github.com/jetfn/jetfn/jetfntest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

func indexes(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestSessions runs whole sessions through the runtime: each gets exactly
// one summary and one transcript.processed with the summary's key.
func TestSessions(t *testing.T) {
	s := startStack(t, testDB(t), testManifest(t, 200*time.Millisecond, ""))
	tests := []struct {
		name      string
		saved     []int
		published int
		want      events.TranscriptProcessed // IDs filled in
	}{
		{name: "twelve segments", saved: indexes(0, 12), published: 12, want: events.TranscriptProcessed{Segments: 12, Complete: true}},
		{name: "last segment never arrives", saved: indexes(0, 11), published: 12, want: events.TranscriptProcessed{Segments: 11, Complete: false}},
		{name: "silent session", published: 0, want: events.TranscriptProcessed{Segments: 0, Complete: true}},
		{name: "segments saved but none announced", saved: indexes(0, 2), published: 0, want: events.TranscriptProcessed{Segments: 2, Complete: true}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.t = t
			conv, sess := "conv-1", "sess-"+string(rune('a'+i))
			s.save(conv, sess, tt.saved...)
			s.sessionEnded(conv, sess, tt.published)
			sum := s.awaitOneSummary(conv, sess)
			runtimetest.Eventually(t, 30*time.Second, "ack", func() bool { return s.settled(uint64(i + 1)) })
			want := tt.want
			want.ConversationID, want.SessionID = conv, sess
			checkProcessed(t, s.processed(conv, sess), want)
			if sum.ID != conv+":"+sess || sum.Segments != want.Segments || sum.Complete != want.Complete ||
				sum.PublishedSegments != tt.published {
				t.Errorf("summary %+v, want _id %s:%s and %+v", sum, conv, sess, want)
			}
		})
	}
	if st := s.status(); st.Retried != 0 || st.Redeliveries != 0 || st.DeadLettered != 0 {
		t.Errorf("stats %+v, want no naks, redeliveries or dead letters", st)
	}
}

// checkProcessed wants exactly one stored transcript.processed, keyed by the
// summary's key, with body want.
func checkProcessed(t *testing.T, msgs []*jetstream.RawStreamMsg, want events.TranscriptProcessed) {
	t.Helper()
	if len(msgs) != 1 {
		t.Fatalf("stream holds %d transcript.processed for the session, want 1", len(msgs))
	}
	var got events.TranscriptProcessed
	if err := json.Unmarshal(msgs[0].Data, &got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("transcript.processed %+v, want %+v", got, want)
	}
	key := jetfntest.MsgID(summarizesession.Name, events.TranscriptProcessedSubject, events.SummaryKey(want.ConversationID, want.SessionID))
	if id := msgs[0].Header.Get(jetstream.MsgIDHeader); id != key {
		t.Errorf("Nats-Msg-Id %q, want %q", id, key)
	}
}

// TestSessionEndedTwice delivers session-ended twice under two message IDs,
// so the stream keeps both and the handler runs twice: the upsert and the
// output's message ID still leave one summary and one notification.
func TestSessionEndedTwice(t *testing.T) {
	s := startStack(t, testDB(t), testManifest(t, 200*time.Millisecond, ""))
	s.save("c2", "s2", indexes(0, 12)...)
	data, _ := json.Marshal(events.SessionEnded{ConversationID: "c2", SessionID: "s2", PublishedSegments: 12})
	for _, id := range []string{"ended-1", "ended-2"} {
		if _, err := s.js.Publish(context.Background(), events.SessionEndedSubject, data, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	runtimetest.Eventually(t, 60*time.Second, "both deliveries acked", func() bool { return s.settled(2) })
	// Both runs overlap (concurrency 4), so their upserts race; neither
	// may fail for it.
	if st := s.status(); st.Acked != 2 || st.Retried != 0 {
		t.Fatalf("acked %d, retried %d; want both runs to succeed at once", st.Acked, st.Retried)
	}
	if sums := s.summaries("c2", "s2"); len(sums) != 1 {
		t.Errorf("%d summaries, want 1", len(sums))
	}
	checkProcessed(t, s.processed("c2", "s2"), events.TranscriptProcessed{ConversationID: "c2", SessionID: "s2", Segments: 12, Complete: true})
}

// TestSecondRunAgreesWithOutput ends a session, lets a segment arrive after
// its summary, and delivers session-ended again under another message ID
// (a transcriber retrying after its duplicate window, a replay): the second
// run sees one segment more. Its transcript.processed carries the key the
// first run published, so the stream drops it; the stored summary must be
// the one transcript.processed announced, the first committed.
func TestSecondRunAgreesWithOutput(t *testing.T) {
	s := startStack(t, testDB(t), testManifest(t, 200*time.Millisecond, ""))
	s.save("c6", "s6", indexes(0, 11)...)
	data, _ := json.Marshal(events.SessionEnded{ConversationID: "c6", SessionID: "s6", PublishedSegments: 12})
	for i, id := range []string{"ended-1", "ended-2"} {
		if _, err := s.js.Publish(context.Background(), events.SessionEndedSubject, data, jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
		runtimetest.Eventually(t, 60*time.Second, id+" acked", func() bool { return s.settled(uint64(i + 1)) })
		if i == 0 {
			s.save("c6", "s6", 11) // late: after the first summary
		}
	}
	msgs := s.processed("c6", "s6")
	if len(msgs) != 1 {
		t.Fatalf("stream holds %d transcript.processed for the session, want 1", len(msgs))
	}
	var out events.TranscriptProcessed
	if err := json.Unmarshal(msgs[0].Data, &out); err != nil {
		t.Fatal(err)
	}
	sums := s.summaries("c6", "s6")
	if len(sums) != 1 {
		t.Fatalf("%d summaries, want 1", len(sums))
	}
	if sums[0].Segments != out.Segments || sums[0].Complete != out.Complete {
		t.Errorf("stored summary has %d segments, complete %v; transcript.processed says %d, %v",
			sums[0].Segments, sums[0].Complete, out.Segments, out.Complete)
	}
	if out.Segments != 11 || out.Complete {
		t.Errorf("transcript.processed %+v, want the first run's 11 segments, incomplete", out)
	}
}

// TestLateSegmentsCounted saves the last three segments after
// session-ended, while the handler is already waiting out its quiet period.
// Each count sees at least one more only if a save lands within the quiet
// period: 3 s leaves room for a loaded machine's slow FerretDB write.
func TestLateSegmentsCounted(t *testing.T) {
	s := startStack(t, testDB(t), testManifest(t, 3*time.Second, ""))
	s.save("c3", "s3", indexes(0, 9)...)
	s.sessionEnded("c3", "s3", 12)
	runtimetest.Eventually(t, 30*time.Second, "handler running", func() bool { return s.status().InFlight == 1 })
	for _, i := range []int{9, 10, 11} {
		s.save("c3", "s3", i)
	}
	sum := s.awaitOneSummary("c3", "s3")
	if sum.Segments != 12 || !sum.Complete {
		t.Errorf("summary has %d segments, complete %v; want 12, true", sum.Segments, sum.Complete)
	}
	runtimetest.Eventually(t, 30*time.Second, "ack", func() bool { return s.settled(1) })
	checkProcessed(t, s.processed("c3", "s3"), events.TranscriptProcessed{ConversationID: "c3", SessionID: "s3", Segments: 12, Complete: true})
}

// TestMalformedDeadLettered: a session-ended breaking the contract is
// dead-lettered on its first delivery and summarizes nothing.
func TestMalformedDeadLettered(t *testing.T) {
	s := startStack(t, testDB(t), testManifest(t, 200*time.Millisecond, ""))
	if _, err := s.js.Publish(context.Background(), events.SessionEndedSubject,
		[]byte(`{"conversationId":"c.4","sessionId":"s4","publishedSegments":1}`)); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 30*time.Second, "dead letter", func() bool {
		st := s.status()
		return st.DeadLettered == 1 && st.Termed == 1
	})
	if st := s.status(); st.Handled != 1 || st.Retried != 0 {
		t.Errorf("stats %+v, want one delivery and no retry", st)
	}
	if sums := s.summaries("c.4", "s4"); len(sums) != 0 {
		t.Errorf("%d summaries, want 0", len(sums))
	}
}

// TestMongoOutage stops FerretDB before session-ended arrives: the handler
// fails and is Nak'd with backoff, and once FerretDB is back on the same
// address and data it succeeds with one summary and one notification.
func TestMongoOutage(t *testing.T) {
	dir := t.TempDir()
	first, err := devstack.StartMongo("127.0.0.1:0", dir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(first.URI)
	if err != nil {
		t.Fatal(err)
	}
	// Short driver timeouts, so an attempt fails (and is retried) quickly.
	q := u.Query()
	q.Set("serverSelectionTimeoutMS", "300")
	q.Set("connectTimeoutMS", "300")
	u.RawQuery = q.Encode()
	db := runtimetest.ConnectMongo(t, u.String()).Database(dbName(t))
	s := startStack(t, db, testManifest(t, 200*time.Millisecond, "    maxDeliver: 50\n    backoff: [100ms, 300ms]\n"))
	s.save("c5", "s5", indexes(0, 12)...)

	first.Stop()
	s.sessionEnded("c5", "s5", 12)
	runtimetest.Eventually(t, 30*time.Second, "a failed attempt", func() bool { return s.status().Retried >= 1 })
	t.Logf("failed with Mongo down: %s", s.status().LastError)
	second, err := devstack.StartMongo(u.Host, dir)
	if err != nil {
		t.Fatalf("restarting FerretDB on %s: %v", u.Host, err)
	}
	t.Cleanup(second.Stop)

	sum := s.awaitOneSummary("c5", "s5")
	runtimetest.Eventually(t, 30*time.Second, "ack", func() bool { return s.settled(1) })
	if sum.Segments != 12 || !sum.Complete {
		t.Errorf("summary has %d segments, complete %v; want 12, true", sum.Segments, sum.Complete)
	}
	checkProcessed(t, s.processed("c5", "s5"), events.TranscriptProcessed{ConversationID: "c5", SessionID: "s5", Segments: 12, Complete: true})
	st := s.status()
	t.Logf("after recovery: handled %d, retried %d, acked %d", st.Handled, st.Retried, st.Acked)
	if st.Acked != 1 || st.DeadLettered != 0 {
		t.Errorf("stats %+v, want one ack and no dead letter", st)
	}
}
