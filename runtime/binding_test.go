package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

type event struct {
	ID string `json:"id"`
}

var eventPayload = jetfn.MustPayload[event]([]byte(`{"type":"object","required":["id"],"properties":{"id":{"type":"string"}}}`))

func (e *event) Validate() error {
	if strings.ContainsAny(e.ID, ".*>") {
		return errors.New("id holds a subject token")
	}
	return nil
}

func TestAckAfterHandlerReturns(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{}
	r := env.start(testManifest(t, "    ackWait: 2s\n"), rec)
	env.publish("test.in", `{"id":"a"}`)
	runtimetest.Eventually(t, 10*time.Second, "ack", func() bool { return env.settled("TEST", "fn", 1) })
	if got := rec.count(); got != 1 {
		t.Fatalf("deliveries = %d, want 1", got)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	info := env.consumerInfo("TEST", "fn")
	if info.AckFloor.Stream != 1 || info.NumRedelivered != 0 {
		t.Fatalf("ack floor %d, redelivered %d; want 1, 0", info.AckFloor.Stream, info.NumRedelivered)
	}
}

// TestHandlerContextEndsWhenItReturns: a handler's context ends when the
// handler returns, as an HTTP request's does, so a goroutine it left
// behind stops, and the next message starts with a live one (the worker
// reuses the context).
func TestHandlerContextEndsWhenItReturns(t *testing.T) {
	env := newEnv(t)
	var mu sync.Mutex
	var kept []context.Context
	var errsAtStart []error
	env.start(testManifest(t, "    ackWait: 2s\n    concurrency: 1\n"), jetfn.HandlerFunc(func(ctx context.Context, _ jetfn.Msg) error {
		mu.Lock()
		defer mu.Unlock()
		kept, errsAtStart = append(kept, ctx), append(errsAtStart, ctx.Err())
		return nil
	}))
	env.publish("test.in", `{"id":"a"}`)
	env.publish("test.in", `{"id":"b"}`)
	runtimetest.Eventually(t, 10*time.Second, "acks", func() bool { return env.settled("TEST", "fn", 2) })
	mu.Lock()
	defer mu.Unlock()
	for i, ctx := range kept {
		if errsAtStart[i] != nil {
			t.Errorf("message %d started with a context already done: %v", i+1, errsAtStart[i])
		}
		select {
		case <-ctx.Done():
		default:
			t.Errorf("message %d: context still open after its handler returned", i+1)
		}
	}
}

// TestDeadLetterWithoutRetry covers both routes that must never retry:
// a payload its Payload refuses and a Permanent error.
func TestDeadLetterWithoutRetry(t *testing.T) {
	tests := []struct {
		name       string
		payload    string
		result     error
		wantReason string
	}{
		{name: "not JSON", payload: `{"id":`, wantReason: "payload: not JSON at byte 6: ends before the value is complete"},
		{name: "missing required field", payload: `{"other":1}`, wantReason: "payload: id: missing"},
		{name: "null required field", payload: `{"id":null}`, wantReason: "payload: id: want a string, got null"},
		{name: "case-variant key", payload: `{"ID":"a"}`, wantReason: `payload: id: missing (the payload has "ID"; names are case-sensitive)`},
		{name: "trailing data", payload: `{"id":"a"} {}`, wantReason: "payload: trailing data at byte 11 after the JSON value"},
		{name: "refused by Validate", payload: `{"id":"a.b"}`, wantReason: "payload: id holds a subject token"},
		{name: "permanent error", payload: `{"id":"a"}`, result: jetfn.Permanent(errors.New("account closed")), wantReason: "account closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			var calls int
			h := eventPayload.Handler(func(context.Context, jetfn.Msg, event) error {
				calls++
				return tt.result
			})
			env.start(testManifest(t, "    ackWait: 1s\n    maxDeliver: 5\n"), h)
			env.publish("test.in", tt.payload)
			dl := env.deadLetters(1)[0]
			if got := dl.Header.Get(wire.HeaderError); !strings.Contains(got, tt.wantReason) {
				t.Errorf("reason %q, want it to contain %q", got, tt.wantReason)
			}
			want := map[string]string{wire.HeaderFunction: "fn", wire.HeaderOriginalSubject: "test.in",
				wire.HeaderStreamSequence: "1", wire.HeaderNumDelivered: "1",
				"Nats-Msg-Id": "fn:" + jetfn.StoredMsgID("TEST", streamIdentityOf(t, env.js, "TEST"), 1)}
			for k, v := range want {
				if got := dl.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if string(dl.Data) != tt.payload || dl.Subject != "deadletter.fn" {
				t.Errorf("dead letter %s %q, want deadletter.fn %q", dl.Subject, dl.Data, tt.payload)
			}
			// Term'd: nothing pending and nothing waiting for an ack, so no
			// redelivery can follow.
			runtimetest.Eventually(t, 10*time.Second, "term", func() bool { return env.settled("TEST", "fn", 1) })
			if info := env.consumerInfo("TEST", "fn"); info.Delivered.Consumer != 1 {
				t.Errorf("delivered %d times, want 1", info.Delivered.Consumer)
			}
		})
	}
}

// TestBackoffThenDeadLetter checks that a failing handler is redelivered on
// the manifest's backoff (not after ackWait, not at once) and dead-lettered
// on its last delivery.
func TestBackoffThenDeadLetter(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{result: func(jetfn.Msg) error { return errors.New("mongo down") }}
	env.start(testManifest(t, "    ackWait: 10s\n    maxDeliver: 3\n    backoff: [300ms, 900ms]\n"), rec)
	env.publish("test.in", `{}`)
	dl := env.deadLetters(1)[0]
	if got := dl.Header.Get(wire.HeaderNumDelivered); got != "3" {
		t.Errorf("dead-lettered at delivery %s, want 3", got)
	}
	if got := dl.Header.Get(wire.HeaderError); got != "mongo down" {
		t.Errorf("reason %q, want the handler's last error", got)
	}
	d := rec.all()
	if len(d) != 3 {
		t.Fatalf("deliveries = %d, want 3", len(d))
	}
	for i, want := range []time.Duration{300 * time.Millisecond, 900 * time.Millisecond} {
		gap := d[i+1].at.Sub(d[i].at)
		t.Logf("gap before delivery %d: %s (backoff %s)", i+2, gap, want)
		// Lower bound: the delay was honoured. Upper bound: it was the
		// backoff, not the 10s ack wait.
		if gap < want || gap > 5*time.Second {
			t.Errorf("gap before delivery %d = %s, want about %s", i+2, gap, want)
		}
	}
}

func TestRetryAfterUsesHandlerDelay(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{result: func(m jetfn.Msg) error {
		if m.NumDelivered == 1 {
			return jetfn.RetryAfter(errors.New("rate limited"), 700*time.Millisecond)
		}
		return nil
	}}
	env.start(testManifest(t, "    ackWait: 10s\n    backoff: [5s]\n"), rec)
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 15*time.Second, "second delivery", func() bool { return rec.count() == 2 })
	d := rec.all()
	gap := d[1].at.Sub(d[0].at)
	t.Logf("RetryAfter(700ms) redelivered after %s", gap)
	if gap < 700*time.Millisecond || gap >= 5*time.Second {
		t.Fatalf("redelivered after %s, want the handler's 700ms, not the 5s backoff", gap)
	}
	runtimetest.Eventually(t, 10*time.Second, "ack", func() bool { return env.settled("TEST", "fn", 1) })
}

func TestPanicIsRetried(t *testing.T) {
	env := newEnv(t)
	rec := &recorder{result: func(m jetfn.Msg) error {
		if m.NumDelivered == 1 {
			panic("nil map")
		}
		return nil
	}}
	r := env.start(testManifest(t, "    backoff: [50ms]\n"), rec)
	env.publish("test.in", `{}`)
	// The server may see the ack before the worker counts it: wait for both.
	runtimetest.Eventually(t, 10*time.Second, "ack after panic", func() bool {
		return rec.count() == 2 && env.settled("TEST", "fn", 1) && r.rt.statsOf(t, "fn").Acked == 1
	})
	s := r.rt.statsOf(t, "fn")
	if s.Retried != 1 || s.Acked != 1 || !strings.Contains(s.LastError, "panicked") {
		t.Fatalf("stats %+v, want 1 nak, 1 ack and the panic as last error", s)
	}
}

func TestTimeoutCancelsHandler(t *testing.T) {
	env := newEnv(t)
	h := jetfn.HandlerFunc(func(ctx context.Context, m jetfn.Msg) error {
		if m.NumDelivered > 1 {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	r := env.start(testManifest(t, "    timeout: 200ms\n    backoff: [50ms]\n"), h)
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 10*time.Second, "ack", func() bool { return env.settled("TEST", "fn", 1) })
	if s := r.rt.statsOf(t, "fn"); !strings.Contains(s.LastError, "deadline exceeded") {
		t.Fatalf("last error %q, want the timeout", s.LastError)
	}
}
