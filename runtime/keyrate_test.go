package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/partition"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// keyTimes is a keyOrder that also records when each key's runs started.
type keyTimes struct {
	*keyOrder
	mu sync.Mutex
	at map[string][]time.Time
}

func (k *keyTimes) Handle(ctx context.Context, msg jetfn.Msg) error {
	k.mu.Lock()
	key := strings.TrimPrefix(msg.Subject, "test.")
	k.at[key] = append(k.at[key], time.Now())
	k.mu.Unlock()
	return k.keyOrder.Handle(ctx, msg)
}

// keysInTwoPartitions are two keys that hash to different partitions of n.
func keysInTwoPartitions(n int) (string, string) {
	a := "k0"
	for i := 1; ; i++ {
		b := fmt.Sprintf("k%d", i)
		if partition.Of([]byte(b), n) != partition.Of([]byte(a), n) {
			return a, b
		}
	}
}

// TestKeyRateLimitPacesEachKey: at keyRateLimit 5/s (one run each 200ms
// per key), two instances of an ordered function run each key's burst of
// messages at least 200ms apart, in order and each once, while the two
// keys (in different partitions) run side by side: the limit is per key,
// shared by the instances. A message sent back to wait for its key's turn
// does not count as a run: at maxDeliver 1 nothing is dead-lettered. The
// stats say how many were sent back.
func TestKeyRateLimitPacesEachKey(t *testing.T) {
	env := newEnv(t)
	m := keyedManifest(t, "    ordered: true\n    concurrency: 4\n    partitions: 4\n    maxDeliver: 1\n    keyRateLimit: 5/s\n")
	h := &keyTimes{keyOrder: newKeyOrder(func(jetfn.Msg) bool { return false }), at: map[string][]time.Time{}}
	instances := []*running{env.start(m, h), env.start(m, h)}
	a, b := keysInTwoPartitions(4)
	const each = 6
	published := map[string][]uint64{}
	for range each {
		for _, key := range []string{a, b} {
			ack, err := env.js.Publish(context.Background(), "test."+key, []byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			published[key] = append(published[key], ack.Sequence)
		}
	}
	runtimetest.Eventually(t, 30*time.Second, "every message handled", func() bool { return h.succeeded() >= 2*each })
	h.check(t, env, published, func(key string) string { return "test." + key })
	if n := env.streamMsgs("DEADLETTER"); n != 0 {
		t.Fatalf("%d messages dead-lettered: a wait for the key's turn was counted as a run", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The schedule allows a burst of 1: each run at least an interval
	// after the one before, less a little for the clocks of two
	// instances reading one schedule.
	const interval, slack = 200 * time.Millisecond, 20 * time.Millisecond
	for _, key := range []string{a, b} {
		at := h.at[key]
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < interval-slack {
				t.Errorf("key %s: run %d started %s after the one before, want at least %s at 5/s", key, i+1, gap, interval)
			}
		}
	}
	if first, last := h.at[b][0], h.at[a][len(h.at[a])-1]; !first.Before(last) {
		t.Errorf("key %s started after key %s had finished: the limit held the function, not each key", b, a)
	}
	deferred := uint64(0)
	for _, r := range instances {
		s := r.rt.Stats()[0]
		if s.KeyRateLimit != "5/s" {
			t.Errorf("stats say key rate %q, want 5/s", s.KeyRateLimit)
		}
		deferred += s.KeyRateDeferred
	}
	if deferred == 0 {
		t.Error("stats count no message sent back to wait for its key's turn")
	}
}

// TestKeyRateLimitPermissionsSufficient: a function with keyRateLimit run
// as a user with the --provision permissions keeps each key's schedule
// and sends messages back to wait for their turn with no violation.
func TestKeyRateLimitPermissionsSufficient(t *testing.T) {
	m := subjectManifest(t, "test.in.*", "    key: {token: 3}\n    ordered: true\n    keyRateLimit: 4/s\n"+
		"    outputs:\n      - subject: test.out\n        stream: TEST\n")
	if err := m.Validate([]string{"fn"}); err != nil {
		t.Fatal(err)
	}
	p := startPermsCase(t, m, m.Permissions(manifest.PermissionOptions{Provision: true}), true)
	for i := range 3 {
		p.env.publish("test.in.a", fmt.Sprintf("a%d", i))
	}
	runtimetest.Eventually(t, 20*time.Second, "the outputs", func() bool { return p.outputs() == 3 })
	if s := p.rt.Stats()[0]; s.KeyRateDeferred == 0 {
		t.Errorf("no message waited for its key's turn: %+v", s)
	}
	if v := p.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations with the --provision permissions: %v\n%s", v, p.log.String())
	}
}
