package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// closingHandler records its runs and its Close calls.
type closingHandler struct {
	mu      sync.Mutex
	handled int
	running int
	closed  int
	// lateRun is set when a run was still going when Close was called.
	lateRun bool
}

func (h *closingHandler) Handle(context.Context, jetfn.Msg) error {
	h.mu.Lock()
	h.running++
	h.handled++
	h.mu.Unlock()
	time.Sleep(50 * time.Millisecond) // a run that a drain has to wait for
	h.mu.Lock()
	h.running--
	h.mu.Unlock()
	return nil
}

func (h *closingHandler) Close(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed++
	h.lateRun = h.lateRun || h.running > 0
	return nil
}

func (h *closingHandler) state() (handled, closed int, lateRun bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.handled, h.closed, h.lateRun
}

// handlerLog is a constructor that records every handler it builds.
type handlerLog struct {
	mu    sync.Mutex
	built []*closingHandler
}

func (l *handlerLog) New(jetfn.Deps) (jetfn.Handler, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := &closingHandler{}
	l.built = append(l.built, h)
	return h, nil
}

func (l *handlerLog) handlers() []*closingHandler {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*closingHandler(nil), l.built...)
}

// TestHandlerClosedOnRebindAndShutdown: a live deploy that changes the
// function builds a new handler and closes the old one once its drain is
// over; shutdown closes the new one; each is closed exactly once and never
// while one of its runs is going.
func TestHandlerClosedOnRebindAndShutdown(t *testing.T) {
	env := newEnv(t)
	log := &handlerLog{}
	rt, err := New(env.nc, testManifest(t, ""), []jetfn.Function{{Name: "fn", New: log.New}}, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	r := env.run(rt)
	for range 5 {
		env.publish("test.in", "x")
	}
	first := log.handlers()[0]
	runtimetest.Eventually(t, 10*time.Second, "the first handler ran", func() bool {
		n, _, _ := first.state()
		return n > 0
	})
	if err := rt.Apply(context.Background(), testManifest(t, "    concurrency: 2\n")); err != nil {
		t.Fatal(err)
	}
	hs := log.handlers()
	if len(hs) != 2 {
		t.Fatalf("%d handlers built, want 2 (one per binding)", len(hs))
	}
	if _, closed, late := first.state(); closed != 1 || late {
		t.Fatalf("old handler closed %d times (during a run: %v) after the re-bind, want once, after its runs", closed, late)
	}
	if _, closed, _ := hs[1].state(); closed != 0 {
		t.Fatalf("new handler closed %d times while bound, want 0", closed)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for i, h := range log.handlers() {
		if _, closed, late := h.state(); closed != 1 || late {
			t.Errorf("handler %d closed %d times (during a run: %v) after shutdown, want once, after its runs", i, closed, late)
		}
	}
}

// TestRefusedApplyClosesWhatItBuilt: a deploy refused because another
// function's constructor fails closes the handler it had built for the
// changed function, and leaves the running one open.
func TestRefusedApplyClosesWhatItBuilt(t *testing.T) {
	env := newEnv(t)
	log := &handlerLog{}
	failing := func(jetfn.Deps) (jetfn.Handler, error) { return nil, errors.New("no database") }
	fns := []jetfn.Function{{Name: "fn", New: log.New}, {Name: "fn2", New: failing}}
	rt, err := New(env.nc, testManifest(t, ""), fns, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	both, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: fn, version: 1.0.0, stream: TEST, subject: test.in, concurrency: 2}
  - {name: fn2, version: 1.0.0, stream: TEST, subject: test.other}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Apply(context.Background(), both); !errors.Is(err, ErrRefusedManifest) {
		t.Fatalf("Apply = %v, want it refused", err)
	}
	hs := log.handlers()
	if len(hs) != 2 {
		t.Fatalf("%d handlers built, want 2 (the running one and the refused revision's)", len(hs))
	}
	if _, closed, _ := hs[0].state(); closed != 0 {
		t.Errorf("running handler closed %d times, want 0", closed)
	}
	if _, closed, _ := hs[1].state(); closed != 1 {
		t.Errorf("refused revision's handler closed %d times, want 1", closed)
	}
}

// TestFailedStartClosesEveryHandler: when Run cannot bind a function (here
// fn2's consumer is missing and provisioning is off), it closes the
// handlers of the functions it had bound and of those it had not reached.
func TestFailedStartClosesEveryHandler(t *testing.T) {
	env := newEnv(t)
	three, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: ["test.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: fn, version: 1.0.0, stream: TEST, subject: test.in}
  - {name: fn2, version: 1.0.0, stream: TEST, subject: test.other}
  - {name: fn3, version: 1.0.0, stream: TEST, subject: test.third}
`))
	if err != nil {
		t.Fatal(err)
	}
	// A first run with provisioning makes the streams and the consumers;
	// fn2's is then deleted.
	provisioned := &handlerLog{}
	fns := []jetfn.Function{{Name: "fn", New: provisioned.New}, {Name: "fn2", New: provisioned.New}, {Name: "fn3", New: provisioned.New}}
	rt, err := New(env.nc, three, fns, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.run(rt).stop(t); err != nil {
		t.Fatal(err)
	}
	if err := env.js.DeleteConsumer(context.Background(), "TEST", "fn2"); err != nil {
		t.Fatal(err)
	}

	log := &handlerLog{}
	fns = []jetfn.Function{{Name: "fn", New: log.New}, {Name: "fn2", New: log.New}, {Name: "fn3", New: log.New}}
	rt, err = New(env.nc, three, fns, WithLogger(testLogger()), WithoutProvisioning())
	if err != nil {
		t.Fatal(err)
	}
	runErr := rt.Run(context.Background())
	if runErr == nil || !strings.Contains(runErr.Error(), "fn2") {
		t.Fatalf("Run = %v, want it to fail binding fn2", runErr)
	}
	hs := log.handlers()
	if len(hs) != 3 {
		t.Fatalf("%d handlers built, want 3", len(hs))
	}
	for i, h := range hs {
		if _, closed, _ := h.state(); closed != 1 {
			t.Errorf("handler %d closed %d times after the failed start, want once", i, closed)
		}
	}
}
