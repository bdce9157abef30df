package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/test/testkit"
)

// defaultSessions is the scale-out batch of the normal suite (raceSessions
// under -race); `go tool task scale` sets SCALE_SESSIONS=2000.
const (
	defaultSessions = 300
	raceSessions    = 100
)

// instances is how many `jetfn run` processes share the consumer.
const instances = 3

// scaleManifest binds summarize-session with the ack wait and heartbeat of
// manifests/local.yaml, the concurrency of one small instance, and a short
// quiet period so the batch is bound by the runtime, not by the wait.
const scaleManifest = `# Written by TestScaleOut.
streams:
  - name: TRANSCRIPTION
    subjects: ["transcription.>", "transcript.>"]
    duplicates: 24h
  - name: DEADLETTER
    subjects: ["deadletter.>"]
    duplicates: 24h
functions:
  - name: summarize-session
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.session-ended
    ackWait: 6s
    heartbeat: 2s
    maxDeliver: 5
    backoff: [1s, 5s, 15s, 30s]
    concurrency: 8
    timeout: 2m
    outputs:
      - subject: transcript.processed
        stream: TRANSCRIPTION
    config:
      quiet: 150ms
      maxRounds: 5
`

// fleet is the instances of one test, with their log files.
type fleet struct {
	children []*testkit.Child
	logs     []string
}

// TestScaleOut runs three `jetfn run` processes on one manifest against one
// nats-server and one Mongo-compatible server. A first batch checks that
// the shared durable consumer splits the work and that each session is
// summarized and announced once; a second batch SIGKILLs one instance when
// a third of it is announced and checks the survivors take over its
// messages after the ack wait, with no loss and no duplicate.
func TestScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds jetfn and runs three instances of it")
	}
	n := sessionCount(t)
	began := time.Now()
	dir := t.TempDir()
	bin, err := testkit.Build(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built jetfn in %s", time.Since(began).Round(100*time.Millisecond))

	ns := runtimetest.StartNATS(t)
	mongoSrv, mc := runtimetest.StartMongo(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	db := mc.Database("scale")
	manifest := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(manifest, []byte(scaleManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, bin, dir, testkit.ChildEnv{NATSURL: ns.ClientURL(), MongoURI: mongoSrv.URI, MongoDatabase: "scale", Manifest: manifest})

	t.Run("split", func(t *testing.T) { f.split(t, js, db, n) })
	t.Run("kill-one", func(t *testing.T) { f.killOne(t, js, db, n) })
	t.Logf("TestScaleOut with %d sessions per batch: %s in all", n, time.Since(began).Round(100*time.Millisecond))
}

func sessionCount(t *testing.T) int {
	v := os.Getenv("SCALE_SESSIONS")
	if v == "" && raceEnabled {
		return raceSessions
	}
	if v == "" {
		return defaultSessions
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 {
		t.Fatalf("SCALE_SESSIONS=%q: want a number of at least 10", v)
	}
	return n
}

// startFleet starts the instances and waits until each has bound its
// function. Each child is SIGKILLed and reaped when the test ends, before
// the servers stop (cleanups run last-registered first).
func startFleet(t *testing.T, bin, dir string, env testkit.ChildEnv) *fleet {
	f := &fleet{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := range instances {
		logPath := filepath.Join(dir, fmt.Sprintf("jetfn-%d.log", i))
		c, err := testkit.StartChild(bin, env, logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Kill)
		f.children = append(f.children, c)
		f.logs = append(f.logs, logPath)
	}
	for _, c := range f.children {
		if err := c.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// split publishes n sessions to the running instances and checks each is
// summarized and announced once, and that every instance took a share.
func (f *fleet) split(t *testing.T, js jetstream.JetStream, db *mongo.Database, n int) {
	ss := newSessions("a", n)
	start := time.Now()
	publishBatch(t, js, db, ss)
	published := time.Since(start)
	ctx, cancel := context.WithTimeout(t.Context(), settleTimeout(n))
	defer cancel()
	if err := waitSettled(ctx, js, n); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	verdict := mustCheck(t, js, db, ss)
	shares, _ := f.shares(t, "conv-a-")
	t.Logf("split: %d sessions published in %s, all settled %s after the first publish (%.0f sessions/s); handled per instance %v; %s",
		n, published.Round(time.Millisecond), took.Round(100*time.Millisecond), float64(n)/took.Seconds(), shares, verdict)
	total := 0
	for i, s := range shares {
		total += s
		if s == 0 {
			t.Errorf("instance %d handled no session: the consumer is not shared", i)
		}
	}
	if total != n {
		t.Errorf("%d sessions handled in all, want %d (each once)", total, n)
	}
	// Drop the settled batch's segments and summaries, so the next
	// batch's FerretDB scans cost what its own sessions cost.
	for _, coll := range []string{events.SegmentsCollection, events.SummariesCollection} {
		if _, err := db.Collection(coll).DeleteMany(t.Context(), bson.D{}); err != nil {
			t.Fatal(err)
		}
	}
}

// killOne publishes n more sessions and SIGKILLs instance 0 once a third of
// them are announced. Its unacked messages come back after the ack wait and
// the two others finish the batch.
func (f *fleet) killOne(t *testing.T, js jetstream.JetStream, db *mongo.Database, n int) {
	before, err := notificationCount(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	ss := newSessions("b", n)
	start := time.Now()
	publishBatch(t, js, db, ss)
	ctx, cancel := context.WithTimeout(t.Context(), settleTimeout(n))
	defer cancel()
	var atKill uint64
	err = poll(ctx, 20*time.Millisecond, "a third of the batch announced", func() bool {
		c, err := testkit.SubjectCount(ctx, js, transcriptionStream, events.TranscriptProcessedSubject)
		atKill = c
		return err == nil && c >= before+uint64(n/3)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.children[0].Kill()
	killed := time.Now()
	if err := waitSettled(ctx, js, int(before)+n); err != nil {
		t.Fatal(err)
	}
	after := time.Since(killed)
	verdict := mustCheck(t, js, db, ss)
	shares, recs := f.shares(t, "conv-b-")
	var survivors []handled
	for _, r := range recs[1:] {
		survivors = append(survivors, r.Handled("conv-b-")...)
	}
	took := redeliveryDelay(survivors, killed)
	t.Logf("kill-one: SIGKILL of instance 0 when %d of %d were announced; handled per instance %v; "+
		"survivors handled %d redeliveries, the first %s after the kill (ack wait 6s); all settled %s after the kill, %s after the first publish; %s",
		atKill-before, n, shares, redelivered(survivors), took, after.Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond), verdict)
	var dl uint64
	err = testkit.Retry(t.Context(), readWithin, "reading the dead-letter stream", func(ctx context.Context) error {
		var rerr error
		dl, rerr = deadLettered(ctx, js)
		return rerr
	})
	if err != nil || dl != 0 {
		t.Errorf("dead letters: %d (err %v), want 0", dl, err)
	}
}

// redeliveryDelay is the time from the kill to the first redelivered
// session a survivor finished, or "none".
func redeliveryDelay(hs []handled, killed time.Time) string {
	var first time.Time
	for _, h := range hs {
		if h.NumDelivered > 1 && (first.IsZero() || h.At.Before(first)) {
			first = h.At
		}
	}
	if first.IsZero() {
		return "none"
	}
	return first.Sub(killed).Round(100 * time.Millisecond).String()
}

// publishBatch seeds the sessions' segments, then publishes session-ended
// for each.
func publishBatch(t *testing.T, js jetstream.JetStream, db *mongo.Database, ss []session) {
	t.Helper()
	if err := seed(t.Context(), db, ss); err != nil {
		t.Fatal(err)
	}
	if err := publishAll(t.Context(), js, ss); err != nil {
		t.Fatal(err)
	}
}

// shares parses every instance's log and counts the sessions with prefix
// each one handled.
func (f *fleet) shares(t *testing.T, prefix string) ([]int, []*logRecord) {
	t.Helper()
	shares := make([]int, len(f.logs))
	recs := make([]*logRecord, len(f.logs))
	for i, p := range f.logs {
		r, err := readLog(p)
		if err != nil {
			t.Fatal(err)
		}
		recs[i], shares[i] = r, len(r.Handled(prefix))
		if probs := r.Problems(); len(probs) > 0 {
			t.Logf("instance %d warnings and errors: %v", i, probs)
		}
	}
	return shares, recs
}

func mustCheck(t *testing.T, js jetstream.JetStream, db *mongo.Database, ss []session) tally {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Counting reads the stream through an ordered consumer, whose pulls
	// can meet "no responders" for a moment after a cluster failover; that
	// is the count's own hiccup, not the runtime's, so it is retried.
	var verdict tally
	var lastErr error
	err := poll(ctx, 500*time.Millisecond, "a complete count", func() bool {
		verdict, lastErr = check(ctx, js, db, ss)
		if lastErr != nil {
			t.Logf("counting: %v (retrying)", lastErr)
		}
		return lastErr == nil
	})
	if err != nil {
		t.Fatalf("%v (last: %v)", err, lastErr)
	}
	if !verdict.ok() {
		t.Errorf("not exactly once: %s", verdict)
	}
	return verdict
}

// settleTimeout is generous: two cores shared with other tests, and
// FerretDB's scans grow with the batch (2,000 sessions: 12 minutes).
func settleTimeout(n int) time.Duration {
	return 2*time.Minute + time.Duration(n)*300*time.Millisecond
}
