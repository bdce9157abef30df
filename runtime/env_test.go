package runtime

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// testEnv is one embedded nats-server and a client, for runtime tests.
type testEnv struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
	// logs keeps what the runtimes start started log, printed if the test
	// fails: a failure in CI then says what the runtime saw.
	logs *runtimetest.LogBuffer
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	env := &testEnv{t: t, nc: nc, js: js, logs: &runtimetest.LogBuffer{}}
	t.Cleanup(func() {
		if t.Failed() && env.logs.String() != "" {
			t.Logf("what the runtime logged:\n%s", env.logs.String())
		}
	})
	return env
}

// logger is the runtime's logger in this test: everything from Info up
// kept in e.logs; all of it on stderr with JETFN_TEST_LOG set; none for an
// env built without logs.
func (e *testEnv) logger() *slog.Logger {
	if os.Getenv("JETFN_TEST_LOG") != "" || e.logs == nil {
		return testLogger()
	}
	return slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// testManifest is a manifest with a TEST stream (test.>), the dead-letter
// stream and one function "fn" reading test.in, whose spec lines are given.
func testManifest(t *testing.T, fnSpec string) *manifest.Manifest {
	t.Helper()
	return subjectManifest(t, "test.in", fnSpec)
}

// subjectManifest is testManifest with fn reading subject instead.
func subjectManifest(t *testing.T, subject, fnSpec string) *manifest.Manifest {
	t.Helper()
	if !strings.Contains(fnSpec, "version:") {
		fnSpec = "    version: 1.0.0\n" + fnSpec
	}
	m, err := manifest.Parse([]byte(`
streams:
  - name: TEST
    subjects: ["test.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: fn
    stream: TEST
    subject: ` + subject + `
` + fnSpec))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// running is a Runtime started by start, with a way to stop it.
type running struct {
	rt     *Runtime
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned, after err is set
	err    error
}

// stop cancels Run and waits for it, returning Run's error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

func testLogger() *slog.Logger {
	level := slog.LevelError + 1
	if os.Getenv("JETFN_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// start runs a Runtime for m with one function "fn" and waits until it is
// ready. It stops when the test ends.
func (e *testEnv) start(m *manifest.Manifest, h jetfn.Handler, opts ...Option) *running {
	e.t.Helper()
	fns := []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return h, nil }}}
	opts = append([]Option{WithLogger(e.logger())}, opts...)
	rt, err := New(e.nc, m, fns, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.run(rt)
}

// startUnvalidated is start for a manifest that a test changed after
// validating it, to reach states a valid manifest cannot.
func (e *testEnv) startUnvalidated(m *manifest.Manifest, h jetfn.Handler, opts ...Option) *running {
	e.t.Helper()
	opts = append([]Option{WithLogger(e.logger())}, opts...)
	rt, err := New(e.nc, testManifest(e.t, ""), []jetfn.Function{{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return h, nil }}},
		opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	rt.manifest = m
	return e.run(rt)
}

func (e *testEnv) run(rt *Runtime) *running {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{rt: rt, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = rt.Run(ctx)
		close(r.done)
	}()
	select {
	case <-rt.Ready():
	case <-r.done:
		e.t.Fatalf("Run failed before ready: %v", r.err)
	case <-time.After(30 * time.Second):
		e.t.Fatal("runtime not ready")
	}
	e.t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func (e *testEnv) publish(subject, data string) {
	e.t.Helper()
	if _, err := e.js.Publish(context.Background(), subject, []byte(data)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *testEnv) consumerInfo(stream, durable string) *jetstream.ConsumerInfo {
	e.t.Helper()
	c, err := e.js.Consumer(context.Background(), stream, durable)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info
}

// settled reports whether the consumer has delivered every message and has
// none waiting for an ack.
func (e *testEnv) settled(stream, durable string, delivered uint64) bool {
	info := e.consumerInfo(stream, durable)
	return info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream >= delivered
}

func (e *testEnv) streamMsgs(name string) uint64 {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Msgs
}

// deadLetters waits until DEADLETTER holds n messages and returns them.
func (e *testEnv) deadLetters(n int) []*jetstream.RawStreamMsg {
	e.t.Helper()
	runtimetest.Eventually(e.t, 20*time.Second, "dead letters", func() bool {
		return e.streamMsgs("DEADLETTER") >= uint64(n)
	})
	return runtimetest.StreamMessages(e.t, e.js, "DEADLETTER")
}

// recorder is a handler that records each delivery and answers with the
// result its script gives for the delivery number.
type recorder struct {
	mu         sync.Mutex
	deliveries []recorded
	result     func(msg jetfn.Msg) error
}

type recorded struct {
	msg jetfn.Msg
	at  time.Time
}

func (r *recorder) Handle(_ context.Context, msg jetfn.Msg) error {
	r.mu.Lock()
	r.deliveries = append(r.deliveries, recorded{msg: msg, at: time.Now()})
	r.mu.Unlock()
	if r.result == nil {
		return nil
	}
	return r.result(msg)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.deliveries)
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.deliveries...)
}
