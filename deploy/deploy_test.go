package deploy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// manifestWith is a manifest of the TEST stream and the given function
// entries ("alpha" reads test.a, "beta" test.b).
func manifestWith(functions ...string) []byte {
	return []byte(`
streams:
  - name: TEST
    subjects: ["test.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
` + strings.Join(functions, ""))
}

func alpha(ackWait string) string {
	return "  - {name: alpha, version: 1.0.0, stream: TEST, subject: test.a, ackWait: " + ackWait + ", concurrency: 4}\n"
}

const beta = "  - {name: beta, version: 1.0.0, stream: TEST, subject: test.b, ackWait: 5s, concurrency: 4}\n"

// handled counts how often each message was handled, across instances.
type handled struct {
	mu    sync.Mutex
	times map[string]int
}

func (h *handled) fn(name string) jetfn.Function {
	return jetfn.Function{Name: name, New: func(jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(_ context.Context, m jetfn.Msg) error {
			h.mu.Lock()
			h.times[string(m.Data)]++
			h.mu.Unlock()
			return nil
		}), nil
	}}
}

func (h *handled) count(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.times[id]
}

// publisher publishes a steady stream of unique messages to test.a and,
// while betaOn is set, test.b, until stopped.
type publisher struct {
	betaOn    atomic.Bool
	mu        sync.Mutex
	published map[string][]string // subject → ids
	stop      chan struct{}
	done      chan struct{}
}

func startPublisher(t *testing.T, js jetstream.JetStream) *publisher {
	p := &publisher{published: map[string][]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			subjects := []string{"test.a"}
			if p.betaOn.Load() {
				subjects = append(subjects, "test.b")
			}
			for _, subj := range subjects {
				id := fmt.Sprintf("%s-%d", subj, i)
				if err := publishOnce(js, subj, id); err != nil {
					t.Errorf("publishing %s: %v", id, err)
					return
				}
				p.mu.Lock()
				p.published[subj] = append(p.published[subj], id)
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { p.halt() })
	return p
}

// publishRetries bounds how long one message is published again while its
// ack does not come: a loaded machine can hold a publish past nats.go's 5s
// default, and failing the test then only said the machine was busy.
const publishRetries = 30 * time.Second

// publishOnce publishes id until the stream acknowledges it: the message ID
// makes a retry of a publish that was stored after all a duplicate, so the
// message is stored once and recorded once.
func publishOnce(js jetstream.JetStream, subject, id string) error {
	deadline := time.Now().Add(publishRetries)
	for {
		_, err := js.Publish(context.Background(), subject, []byte(id), jetstream.WithMsgID(id))
		if err == nil || time.Now().After(deadline) {
			return err
		}
		<-time.After(50 * time.Millisecond) // a pause between attempts, not a wait for an effect
	}
}

// publishedWithin bounds a wait for the publisher's next messages: 200
// take about 1.5s idle and up to 3s with -race on two busy cores. It is a
// deadline for progress, not a timing.
const publishedWithin = time.Minute

func (p *publisher) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

func (p *publisher) ids(subject string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.published[subject]...)
}

// TestLiveDeploy runs two instances that follow one deployment and deploys,
// under a steady publish stream: a revision that adds a function, one that
// changes ackWait, one that removes a function and one that is invalid,
// then rolls back. No message may be lost or handled twice.
func TestLiveDeploy(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	admin := runtimetest.Connect(t, ns.ClientURL())
	js, _ := jetstream.New(admin)
	ctx := context.Background()
	h := &handled{times: map[string]int{}}
	fns := []jetfn.Function{h.fn("alpha"), h.fn("beta")}
	deployRev := func(raw []byte) uint64 {
		rev, err := Store(ctx, js, "app", raw)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	first := deployRev(manifestWith(alpha("2s")))
	instances := []*runtime.Runtime{startInstance(t, ns.ClientURL(), fns, first), startInstance(t, ns.ClientURL(), fns, first)}
	pub := startPublisher(t, js)
	waitAll := func(what string, ok func(*runtime.Runtime) bool) {
		t.Helper()
		start := time.Now()
		runtimetest.Eventually(t, 30*time.Second, what, func() bool {
			for _, rt := range instances {
				if !ok(rt) {
					return false
				}
			}
			return true
		})
		t.Logf("%s: both instances after %s", what, time.Since(start).Round(time.Millisecond))
	}
	digestOf := func(raw []byte) string {
		m, err := manifest.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m.Digest
	}
	runs := func(raw []byte) func(*runtime.Runtime) bool {
		d := digestOf(raw)
		return func(rt *runtime.Runtime) bool { return rt.Manifest().Digest == d }
	}

	addBeta := manifestWith(alpha("2s"), beta)
	deployRev(addBeta)
	waitAll("beta added", runs(addBeta))
	pub.betaOn.Store(true)

	slower := manifestWith(alpha("3s"), beta)
	deployRev(slower)
	waitAll("alpha's ackWait changed", runs(slower))
	if c, _ := js.Consumer(ctx, "TEST", "alpha"); c.CachedInfo().Config.AckWait != 3*time.Second {
		t.Fatalf("alpha's consumer ackWait = %s, want 3s", c.CachedInfo().Config.AckWait)
	}

	pub.betaOn.Store(false)
	removeBeta := manifestWith(alpha("3s"))
	deployRev(removeBeta)
	waitAll("beta removed", runs(removeBeta))

	deployRev(manifestWith(alpha("3s"), "  - {name: gamma, version: 1.0.0, stream: TEST, subject: test.c}\n"))
	waitAll("invalid revision refused", func(rt *runtime.Runtime) bool {
		s := rt.Stats()
		return len(s) == 1 && strings.Contains(s[0].ManifestRefused, `unknown function "gamma"`)
	})
	for _, rt := range instances {
		if !runs(removeBeta)(rt) {
			t.Fatal("an instance left the previous manifest after a refused revision")
		}
	}
	if _, to, err := Rollback(ctx, js, "app"); err != nil || string(to.Raw) != string(removeBeta) {
		t.Fatalf("rollback: %v, restored %q", err, to.Raw)
	}
	waitAll("rollback applied and refusal cleared", func(rt *runtime.Runtime) bool {
		s := rt.Stats()
		return len(s) == 1 && s[0].ManifestRefused == ""
	})

	pub.halt()
	checkOnce(t, h, pub.ids("test.a"), js, "alpha")
	checkAtMostOnce(t, h, pub.ids("test.b"), js, "beta")
}

func startInstance(t *testing.T, url string, fns []jetfn.Function, rev uint64) *runtime.Runtime {
	t.Helper()
	nc := runtimetest.Connect(t, url)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	current, err := Load(ctx, js, "app")
	if err != nil || current.Number != rev {
		t.Fatalf("load: %v (revision %d, want %d)", err, current.Number, rev)
	}
	m, err := current.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	rt, err := runtime.New(nc, m, fns, runtime.WithLogger(log), runtime.WithDrainTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := rt.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	<-rt.Ready()
	wg.Go(func() {
		if err := Follow(ctx, js, "app", current.Number, rt, log); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Follow: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return rt
}

// checkOnce: every message was handled exactly once.
func checkOnce(t *testing.T, h *handled, ids []string, js jetstream.JetStream, durable string) {
	t.Helper()
	runtimetest.Eventually(t, 30*time.Second, "every "+durable+" message handled", func() bool {
		for _, id := range ids {
			if h.count(id) == 0 {
				return false
			}
		}
		return true
	})
	twice := 0
	for _, id := range ids {
		if h.count(id) > 1 {
			twice++
		}
	}
	t.Logf("%s: %d published, %d handled, %d handled twice, 0 lost", durable, len(ids), len(ids), twice)
	if twice > 0 {
		t.Fatalf("%d %s messages handled twice", twice, durable)
	}
}

// checkAtMostOnce: every message of a function that was removed was handled
// once or is still waiting in its durable consumer; none twice.
func checkAtMostOnce(t *testing.T, h *handled, ids []string, js jetstream.JetStream, durable string) {
	t.Helper()
	c, err := js.Consumer(context.Background(), "TEST", durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done, twice := 0, 0
	for _, id := range ids {
		switch n := h.count(id); {
		case n == 1:
			done++
		case n > 1:
			twice++
		}
	}
	waiting := int(info.NumPending) + info.NumAckPending
	t.Logf("%s: %d published, %d handled, %d waiting in its consumer, %d handled twice", durable, len(ids), done, waiting, twice)
	if twice > 0 || done+waiting < len(ids) {
		t.Fatalf("%s: %d handled + %d waiting of %d published, %d twice", durable, done, waiting, len(ids), twice)
	}
}
