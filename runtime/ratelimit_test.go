package runtime

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// handledAt records when each message's handler ran.
type handledAt struct {
	mu sync.Mutex
	at []time.Time
}

func (h *handledAt) Handle(context.Context, jetfn.Msg) error {
	h.mu.Lock()
	h.at = append(h.at, time.Now())
	h.mu.Unlock()
	return nil
}

// span is the time from the first run to the last, and how many ran.
func (h *handledAt) span() (time.Duration, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.at) == 0 {
		return 0, 0
	}
	first, last := h.at[0], h.at[0]
	for _, t := range h.at {
		first, last = minTime(first, t), maxTime(last, t)
	}
	return last.Sub(first), len(h.at)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestRateLimitPacesPulls: at 20/s (one message each 50ms, bursts of 2),
// 30 quick messages are granted over (30-2) × 50ms (the test allows two
// intervals for the pull's latency), and the messages the rate
// holds back stay on the server: never more than a burst and the workers
// are delivered and unacknowledged at once, and the stats say what is held.
func TestRateLimitPacesPulls(t *testing.T) {
	env := newEnv(t)
	h := &handledAt{}
	r := env.start(testManifest(t, "    concurrency: 4\n    prefetch: 10\n    rateLimit: 20/s\n"), h)
	const n = 30
	for range n {
		env.publish("test.in", "x")
	}
	var maxAckPending, maxHeld int
	var limit string
	runtimetest.Eventually(t, 30*time.Second, "every message handled", func() bool {
		maxAckPending = max(maxAckPending, env.consumerInfo("TEST", "fn").NumAckPending)
		s := r.rt.Stats()[0] // the status the micro stats and jetfn status show
		maxHeld, limit = max(maxHeld, int(s.RateHeld)), s.RateLimit
		_, count := h.span()
		return count == n
	})
	if span, _ := h.span(); span < (n-4)*50*time.Millisecond {
		t.Errorf("%d messages in %s, want at least %s at 20/s", n, span, (n-4)*50*time.Millisecond)
	}
	if maxAckPending > 2+4 {
		t.Errorf("up to %d messages delivered and unacknowledged at once, want at most a burst (2) and the workers (4): the rate must hold them on the server", maxAckPending)
	}
	if limit != "20/s" || maxHeld == 0 {
		t.Errorf("stats said rate_limit %q and held at most %d, want 20/s and some held", limit, maxHeld)
	}
}

// TestRateLimitSharedByInstances: two instances of a function limited to
// 20/s handle 30 messages no faster than one would: the schedule is the
// function's, in KV, not each instance's.
func TestRateLimitSharedByInstances(t *testing.T) {
	env := newEnv(t)
	h := &handledAt{}
	m := testManifest(t, "    concurrency: 4\n    rateLimit: 20/s\n")
	env.start(m, h)
	env.start(m, h)
	const n = 30
	for range n {
		env.publish("test.in", "x")
	}
	runtimetest.Eventually(t, 30*time.Second, "every message handled", func() bool {
		_, count := h.span()
		return count == n
	})
	if span, _ := h.span(); span < (n-4)*50*time.Millisecond {
		t.Errorf("two instances handled %d messages in %s, want at least %s: 20/s for the function, not for each instance", n, span, (n-4)*50*time.Millisecond)
	}
}

// TestSharedBucketsUnderProvisionPermissions: a rate-limited singleton
// function run as a user with the --provision permissions on an empty
// server creates the rates and leases buckets, keeps its schedule and its
// lease there, and meets no refusal.
func TestSharedBucketsUnderProvisionPermissions(t *testing.T) {
	m := testManifest(t, "    ackWait: 300ms\n    heartbeat: 100ms\n    maxDeliver: 2\n    concurrency: 3\n    rateLimit: 50/s\n    singleton: true\n"+
		"    outputs:\n      - subject: test.out\n        stream: TEST\n")
	if err := m.Validate([]string{"fn"}); err != nil {
		t.Fatal(err)
	}
	p := startPermsCase(t, m, m.Permissions(manifest.PermissionOptions{Provision: true}), true)
	runtimetest.Eventually(t, 20*time.Second, "outputs", func() bool { return p.outputs() == 2 })
	for _, bucket := range []string{manifest.RatesBucket, manifest.LeasesBucket} {
		kv, err := p.env.js.KeyValue(context.Background(), bucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Get(context.Background(), "fn"); err != nil {
			t.Fatalf("the function's key in %s: %v", bucket, err)
		}
	}
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the --provision permissions: %v\n%s", v, p.log.String())
	}
}

// TestRateLimitSpendsTurnsOnMessages: at 1/m, a message that arrives
// after the function sat idle through several pull requests that expired
// empty is handled at once: turns go to messages, not to requests (when
// each request took one, the first empty one used up the minute).
func TestRateLimitSpendsTurnsOnMessages(t *testing.T) {
	env := newEnv(t)
	h := &handledAt{}
	env.start(testManifest(t, "    rateLimit: 1/m\n"), h)
	time.Sleep(3 * pullWait) // the scenario: idle through three empty pull requests
	env.publish("test.in", "x")
	runtimetest.Eventually(t, 10*time.Second, "the message handled within seconds, not a minute", func() bool {
		_, n := h.span()
		return n == 1
	})
}
