package crash

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
	"github.com/nats-io/nats.go/jetstream"
)

// deletedQuiet is summarize-session's quiet period in these tests: a
// session with all its segments seeded settles after one quiet wait, so a
// short one keeps each case to seconds.
const deletedQuiet = 200 * time.Millisecond

// deletedFixture is one case's own stack, manifest and children. Every case
// deletes the consumer or the stream, so no two share a server.
type deletedFixture struct {
	t        *testing.T
	bin      string
	dir      string
	stack    *Stack
	manifest string
	db       string
	runs     int
}

func newDeletedFixture(t *testing.T, bin string) *deletedFixture {
	t.Helper()
	dir := t.TempDir()
	stack, err := StartStack(dir)
	if err != nil {
		t.Fatalf("starting the embedded nats-server and Mongo: %v", err)
	}
	t.Cleanup(stack.Close)
	f := &deletedFixture{t: t, bin: bin, dir: dir, stack: stack,
		manifest: filepath.Join(dir, "manifest.yaml"), db: "deleted"}
	// The harness's manifest: production consumer settings, 24h window.
	if err := writeManifest(f.manifest, manifestParams{window: dayWindow, quiet: deletedQuiet, consumer: localConsumer}); err != nil {
		t.Fatal(err)
	}
	return f
}

// start runs `jetfn run args...` straight against the servers (no proxy:
// nothing here drops frames), with extraEnv added to the harness's
// environment, and waits until its functions are bound. On a failure the
// test log gets the tail of the child's log, which is where today's
// warnings are.
func (f *deletedFixture) start(extraEnv []string, args ...string) *testkit.Child {
	f.t.Helper()
	f.runs++
	logPath := filepath.Join(f.dir, fmt.Sprintf("jetfn-%d.log", f.runs))
	env := testkit.ChildEnv{NATSURL: f.stack.NATSURL(), MongoURI: f.stack.MongoURI(),
		MongoDatabase: f.db, Manifest: f.manifest, Args: args, Extra: extraEnv}
	c, err := testkit.StartChild(f.bin, env, logPath)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		c.Kill() // reaps; a child already stopped is left as it is
		if f.t.Failed() {
			f.t.Logf("last lines of %s:\n%s", logPath, logTail(logPath, 8))
		}
	})
	ctx, cancel := context.WithTimeout(f.t.Context(), 30*time.Second)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// pause stops the child with SIGSTOP until the returned resume is called,
// so what the test does meanwhile happens before the child can notice any
// of it. The pause is well under a second, far inside every NATS and Mongo
// timeout.
func pause(t *testing.T, c *testkit.Child) (resume func()) {
	t.Helper()
	if err := c.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pausing jetfn: %v", err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := c.Signal(syscall.SIGCONT); err != nil {
				t.Errorf("resuming jetfn: %v", err)
			}
		})
	}
	t.Cleanup(resume) // a Fatalf while paused must not leave it stopped
	return resume
}

func logTail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// session is a fresh session of this case, named so a failure says which.
func (f *deletedFixture) session(name string) session {
	return session{conversationID: "conv-deleted", sessionID: "sess-" + name, segments: segmentsPerSession}
}

// send seeds the session's segments, then publishes its session-ended.
// With retry it publishes again until the stream takes it, as the
// transcriber does while the stream is missing.
func (f *deletedFixture) send(ctx context.Context, s session, retry bool) {
	f.t.Helper()
	if err := seed(ctx, f.stack.DB(f.db), s); err != nil {
		f.t.Fatal(err)
	}
	if !retry {
		if err := publishEnded(ctx, f.stack.js, s); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	const within = 20 * time.Second
	var last error
	ok := pollUntil(ctx, within, 100*time.Millisecond, func(ctx context.Context) bool {
		last = publishEnded(ctx, f.stack.js, s)
		return last == nil
	})
	if !ok {
		f.t.Fatalf("session-ended of %s: want the stream to take it within %s (the runtime recreates %s), "+
			"saw every publish fail, the last with: %v", s.key(), within, transcriptionStream, last)
	}
}

// nextSeq is the sequence the next message stored in TRANSCRIPTION gets.
func (f *deletedFixture) nextSeq(ctx context.Context) uint64 {
	f.t.Helper()
	seq, err := nextSeq(ctx, f.stack.js, transcriptionStream)
	if err != nil {
		f.t.Fatalf("reading %s: %v", transcriptionStream, err)
	}
	return seq
}

// tally is what is stored for a set of sessions, and the consumer's state.
type tally struct {
	summaries, notes map[string]int
	consumer         string
	settled          bool
}

// count reads the summaries of ss, the transcript.processed messages stored
// from stream sequence from on, and the consumer. A missing stream or
// consumer is part of what it saw, not an error.
func (f *deletedFixture) count(ctx context.Context, from uint64, ss []session) tally {
	tl := tally{summaries: map[string]int{}, notes: map[string]int{}}
	sums, err := testkit.SummaryCounts(ctx, f.stack.DB(f.db))
	if err != nil {
		tl.consumer = "counting summaries: " + err.Error()
		return tl
	}
	for _, s := range ss {
		tl.summaries[s.key()] = sums[s.key()]
	}
	if ns, err := testkit.ScanNotifications(ctx, f.stack.js, transcriptionStream, from); err == nil {
		for _, n := range ns {
			tl.notes[n.Key]++
		}
	}
	info, err := consumerInfo(ctx, f.stack.js)
	switch {
	case err != nil:
		tl.consumer = "consumer " + functionName + ": " + err.Error()
	default:
		tl.settled = settled(info)
		tl.consumer = fmt.Sprintf("consumer %s: %d pending, %d ack pending", functionName, info.NumPending, info.NumAckPending)
	}
	return tl
}

// once reports whether every session has exactly one summary and one
// notification and the consumer has nothing left; dup is true as soon as
// any session has two of either, which no waiting can undo.
func (tl tally) once(ss []session) (done, dup bool) {
	done = tl.settled
	for _, s := range ss {
		k := s.key()
		done = done && tl.summaries[k] == 1 && tl.notes[k] == 1
		dup = dup || tl.summaries[k] > 1 || tl.notes[k] > 1
	}
	return done, dup
}

func (tl tally) String(ss []session) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "%s: %d summaries, %d transcript.processed; ", s.key(), tl.summaries[s.key()], tl.notes[s.key()])
	}
	return b.String() + tl.consumer
}

// awaitOnce polls until every session in ss was handled exactly once (see
// tally.once), and fails with what it last saw otherwise.
func (f *deletedFixture) awaitOnce(ctx context.Context, within time.Duration, stage string, from uint64, ss []session) {
	f.t.Helper()
	var last tally
	var dup bool
	pollUntil(ctx, within, 100*time.Millisecond, func(ctx context.Context) bool {
		var done bool
		last = f.count(ctx, from, ss)
		done, dup = last.once(ss)
		return done || dup
	})
	if done, _ := last.once(ss); !done || dup {
		f.t.Fatalf("%s: want each of %d sessions handled exactly once (1 summary, 1 transcript.processed, consumer settled) "+
			"within %s; saw %s", stage, len(ss), within, last.String(ss))
	}
}

// attemptTimeout bounds one look inside pollUntil.
const attemptTimeout = 3 * time.Second

// pollUntil calls cond every interval until it holds or within has passed,
// and reports whether it held. Unlike poll, each call gets its own
// attemptTimeout rather than what is left of the deadline, so the last look
// before a failure is a whole one: its reading is what the failure quotes,
// not a "context deadline exceeded" of its own making.
func pollUntil(ctx context.Context, within, interval time.Duration, cond func(ctx context.Context) bool) bool {
	deadline := time.Now().Add(within)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		ok := cond(actx)
		cancel()
		if ok {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// declared is the part of a consumer's configuration the manifest sets.
type declared struct {
	Durable, FilterSubject string
	FilterSubjects         string
	AckPolicy              jetstream.AckPolicy
	AckWait                time.Duration
	MaxDeliver             int
}

func declaredOf(c jetstream.ConsumerConfig) declared {
	return declared{Durable: c.Durable, FilterSubject: c.FilterSubject, FilterSubjects: strings.Join(c.FilterSubjects, ","),
		AckPolicy: c.AckPolicy, AckWait: c.AckWait, MaxDeliver: c.MaxDeliver}
}

// consumerConfig is the function's consumer configuration as stored now.
func (f *deletedFixture) consumerConfig(ctx context.Context) (jetstream.ConsumerConfig, error) {
	info, err := consumerInfo(ctx, f.stack.js)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	return info.Config, nil
}

// freeAddr is a loopback address nothing listens on, for METRICS_ADDR.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	return addr
}
