package runtime

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/tracing"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// withRemoteProbe makes remote functions look up their instances every d.
func withRemoteProbe(d time.Duration) Option {
	return func(o *options) error {
		o.remoteProbe = d
		return nil
	}
}

// remoteManifest makes "fn" a remote function on remote.fn that may
// publish to test.out; extra lines override its settings.
func remoteManifest(t *testing.T, extra string) *manifest.Manifest {
	t.Helper()
	return testManifest(t, "    remote: {subject: remote.fn}\n    outputs: [{subject: test.out, stream: TEST}]\n"+extra)
}

// startRemoteFn runs the runtime with the remote function "fn".
func (e *testEnv) startRemoteFn(m *manifest.Manifest) *running {
	e.t.Helper()
	return e.start(m, nil, withRemoteProbe(200*time.Millisecond))
}

func (e *testEnv) startRemote(reply func(req micro.Request, n int)) *runtimetest.Remote {
	e.t.Helper()
	return runtimetest.StartRemote(e.t, e.nc.ConnectedUrl(), "test-remote", "remote.fn", reply)
}

func succeed(req micro.Request, _ int) { _ = req.Respond(nil) }

func respondErr(code, desc string, header map[string][]string) func(micro.Request, int) {
	return func(req micro.Request, _ int) {
		_ = req.Error(code, desc, nil, micro.WithHeaders(header))
	}
}

// firstThen answers the first request with first and every later one with
// then.
func firstThen(first, then func(micro.Request, int)) func(micro.Request, int) {
	return func(req micro.Request, n int) {
		if n == 1 {
			first(req, n)
			return
		}
		then(req, n)
	}
}

// lateReply answers after d, from its own goroutine, so the requests that
// follow are answered at once.
func lateReply(d time.Duration) func(micro.Request, int) {
	return func(req micro.Request, _ int) {
		go func() {
			time.Sleep(d) // the remote is slow: the point of the test
			succeed(req, 0)
		}()
	}
}

func replyJSON(body string) func(micro.Request, int) {
	return func(req micro.Request, _ int) { _ = req.Respond([]byte(body)) }
}

// TestRemoteRequest: the request carries the payload unchanged, the
// message's headers and jetfn's, and an empty reply acks the message,
// counted like any function's.
func TestRemoteRequest(t *testing.T) {
	env := newEnv(t)
	remote := env.startRemote(succeed)
	r := env.startRemoteFn(remoteManifest(t, "    timeout: 20s\n"))
	msg := &nats.Msg{Subject: "test.in", Data: []byte(`{"name":"Ada"}`), Header: nats.Header{"X-Trace": {"t1"}}}
	msg.Header.Set(jetstream.MsgIDHeader, "order-7")
	if _, err := env.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 10*time.Second, "ack", func() bool { return env.settled("TEST", "fn", 1) })
	calls := remote.Calls()
	if len(calls) != 1 {
		t.Fatalf("remote got %d requests, want 1", len(calls))
	}
	c := calls[0]
	want := map[string]string{"X-Trace": "t1", "Nats-Msg-Id": "order-7", wire.HeaderFunction: "fn", wire.HeaderRemoteStream: "TEST",
		wire.HeaderRemoteStreamSeq: "1", wire.HeaderRemoteDelivery: "1", wire.HeaderRemoteSubject: "test.in", wire.HeaderRemoteMsgID: "order-7"}
	for k, v := range want {
		if got := c.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if string(c.Data) != `{"name":"Ada"}` {
		t.Errorf("payload %q, want it unchanged", c.Data)
	}
	deadline, err := time.Parse(time.RFC3339Nano, c.Header.Get(wire.HeaderRemoteDeadline))
	if err != nil || !deadline.After(c.At) || !strings.HasSuffix(c.Header.Get(wire.HeaderRemoteDeadline), "Z") {
		t.Errorf("deadline %q (%v), want RFC 3339 UTC after the request's arrival %s", c.Header.Get(wire.HeaderRemoteDeadline), err, c.At)
	}
	if len(c.Header.Get(wire.HeaderRemoteDeadline)) != len("2006-01-02T15:04:05.000Z") {
		t.Errorf("deadline %q, want milliseconds", c.Header.Get(wire.HeaderRemoteDeadline))
	}
	s := r.rt.Stats()[0]
	if s.Handled != 1 || s.Acked != 1 || s.Remote != "remote.fn" {
		t.Errorf("stats %+v, want 1 handled and acked, remote remote.fn", s)
	}
	runtimetest.Eventually(t, 10*time.Second, "one instance found", func() bool { return r.rt.Stats()[0].RemoteInstances == 1 })
	if err := r.rt.RemotesUnanswered(); err != nil {
		t.Errorf("RemotesUnanswered = %v with the remote running", err)
	}
}

// TestRemoteOutputs: a reply's outputs are published in order through the
// function's Publisher, with scoped message IDs, then the message is acked;
// the ID of the input keys them, so a second delivery's outputs dedup.
func TestRemoteOutputs(t *testing.T) {
	env := newEnv(t)
	bin := base64.StdEncoding.EncodeToString([]byte{0, 1, 2})
	env.startRemote(func(req micro.Request, _ int) {
		id := req.Headers().Get(wire.HeaderRemoteMsgID)
		_ = req.Respond([]byte(`{"outputs":[{"subject":"test.out","data":{ "greeting": "hello" },"key":"` + id + `:a"},` +
			`{"subject":"test.out","dataBase64":"` + bin + `","key":"` + id + `:b"}]}`))
	})
	env.startRemoteFn(remoteManifest(t, ""))
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 10*time.Second, "ack", func() bool { return env.settled("TEST", "fn", 1) })
	var got []string
	for _, m := range runtimetest.StreamMessages(t, env.js, "TEST") {
		if m.Subject == "test.out" {
			got = append(got, m.Header.Get("Nats-Msg-Id")+" "+string(m.Data))
		}
	}
	in := jetfn.StoredMsgID("TEST", streamIdentityOf(t, env.js, "TEST"), 1)
	want := []string{`jetfn:fn:test.out:` + in + `:a {"greeting":"hello"}`, "jetfn:fn:test.out:" + in + ":b \x00\x01\x02"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("outputs %q, want %q", got, want)
	}
}

// TestRemoteDelayedOutput: a reply's output with "after" is published
// that much later, by the server, with its ID on the output.
func TestRemoteDelayedOutput(t *testing.T) {
	env := newEnv(t)
	env.startRemote(func(req micro.Request, _ int) {
		id := req.Headers().Get(wire.HeaderRemoteMsgID)
		_ = req.Respond([]byte(`{"outputs":[{"subject":"test.out","data":"later","key":"` + id + `","after":"1s"}]}`))
	})
	m := testManifest(t, "    remote: {subject: remote.fn}\n    outputs: [{subject: test.out, stream: TEST, delayed: true}]\n")
	env.startRemoteFn(m)
	published := time.Now()
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 10*time.Second, "ack", func() bool { return env.settled("TEST", "fn", 1) })
	runtimetest.Eventually(t, 10*time.Second, "the delayed output", func() bool { return env.storedOn("test.out") == 1 })
	if took := time.Since(published); took < 900*time.Millisecond {
		t.Errorf("the output came %s after the publish, before its second", took)
	}
	if receipts := env.storedUnder("test.out.jetfn-delay.*.sent"); receipts != 1 {
		t.Errorf("%d receipts, want 1", receipts)
	}
}

// TestRemoteReplies covers every row of the reply table: what each reply
// makes of the delivery.
func TestRemoteReplies(t *testing.T) {
	valid := `{"subject":"test.out","data":1,"key":"k1"}`
	tests := []struct {
		name  string
		extra string // manifest lines
		reply func(micro.Request, int)
		// wantReason, if set, is part of the dead letter's reason after
		// wantCalls requests; otherwise the message is acked after them.
		wantCalls  int
		wantReason string
		// minGap, when set, is the least time between the first two
		// requests: the delay the reply asked for was honoured.
		minGap, maxGap time.Duration
	}{
		{name: "success with an empty body acks", reply: succeed, wantCalls: 1},
		{name: "an empty outputs list acks", reply: replyJSON(`{"outputs":[]}`), wantCalls: 1},
		{name: "undeclared output dead-letters and publishes nothing",
			reply:     replyJSON(`{"outputs":[` + valid + `,{"subject":"test.other","data":1,"key":"k2"}]}`),
			wantCalls: 1, wantReason: `outputs[1]: publish to an undeclared output: "test.other" is not one of the function's outputs [test.out]`},
		{name: "wildcard output dead-letters", reply: replyJSON(`{"outputs":[{"subject":"test.*","data":1,"key":"k"}]}`),
			wantCalls: 1, wantReason: `outputs[0]: subject "test.*" is not one to publish to`},
		{name: "empty key dead-letters", reply: replyJSON(`{"outputs":[{"subject":"test.out","data":1,"key":""}]}`),
			wantCalls: 1, wantReason: "outputs[0]: publish without a key"},
		{name: "both data and dataBase64 dead-letters",
			reply:     replyJSON(`{"outputs":[{"subject":"test.out","data":1,"dataBase64":"AA==","key":"k"}]}`),
			wantCalls: 1, wantReason: "both data and dataBase64"},
		{name: "neither data nor dataBase64 dead-letters", reply: replyJSON(`{"outputs":[{"subject":"test.out","key":"k"}]}`),
			wantCalls: 1, wantReason: "neither data nor dataBase64"},
		{name: "bad base64 dead-letters", reply: replyJSON(`{"outputs":[{"subject":"test.out","dataBase64":"!!","key":"k"}]}`),
			wantCalls: 1, wantReason: "dataBase64 is not standard base64"},
		{name: "a body that is not JSON dead-letters", reply: replyJSON(`ok`),
			wantCalls: 1, wantReason: `remote remote.fn broke the reply contract: the body is not {"outputs":`},
		{name: "a misspelt member dead-letters", reply: replyJSON(`{"output":[` + valid + `]}`),
			wantCalls: 1, wantReason: "broke the reply contract"},
		{name: "a delay of an output not declared delayed dead-letters and publishes nothing",
			reply:     replyJSON(`{"outputs":[` + valid + `,{"subject":"test.out","data":1,"key":"k2","after":"1s"}]}`),
			wantCalls: 1, wantReason: "outputs[1]: delayed publish to an output not declared delayed: test.out is not declared delayed: true"},
		{name: "a bad delay dead-letters", reply: replyJSON(`{"outputs":[{"subject":"test.out","data":1,"key":"k","at":"tomorrow"}]}`),
			wantCalls: 1, wantReason: `at "tomorrow" is not an RFC 3339 time`},
		{name: "400 dead-letters with the description", reply: respondErr("400", "bad payload", nil),
			wantCalls: 1, wantReason: "remote remote.fn replied 400: bad payload"},
		{name: "404 dead-letters", reply: respondErr("404", "no such greeting", nil), wantCalls: 1, wantReason: "no such greeting"},
		{name: "408 is retried", reply: firstThen(respondErr("408", "slow", nil), succeed), wantCalls: 2},
		{name: "429 with Retry-After waits that long", extra: "    backoff: [10s]\n",
			reply:     firstThen(respondErr("429", "slow down", map[string][]string{"Retry-After": {"0.5"}}), succeed),
			wantCalls: 2, minGap: 500 * time.Millisecond, maxGap: 10 * time.Second},
		{name: "503 with Retry-After waits that long", extra: "    backoff: [10s]\n",
			reply:     firstThen(respondErr("503", "maintenance", map[string][]string{"Retry-After": {"1"}}), succeed),
			wantCalls: 2, minGap: time.Second, maxGap: 10 * time.Second},
		{name: "503 without Retry-After takes the backoff", extra: "    backoff: [700ms]\n",
			reply: firstThen(respondErr("503", "maintenance", nil), succeed), wantCalls: 2, minGap: 700 * time.Millisecond},
		{name: "429 without a number in Retry-After takes the backoff", extra: "    backoff: [700ms]\n",
			reply:     firstThen(respondErr("429", "slow down", map[string][]string{"Retry-After": {"soon"}}), succeed),
			wantCalls: 2, minGap: 700 * time.Millisecond},
		{name: "500 is retried", reply: firstThen(respondErr("500", "db down", nil), succeed), wantCalls: 2},
		{name: "500 on the last delivery dead-letters", extra: "    maxDeliver: 2\n", reply: respondErr("500", "db down", nil),
			wantCalls: 2, wantReason: "remote remote.fn replied 500: db down"},
		{name: "429 with Retry-After on the last delivery dead-letters", extra: "    maxDeliver: 1\n",
			reply:     respondErr("429", "slow down", map[string][]string{"Retry-After": {"1"}}),
			wantCalls: 1, wantReason: "replied 429: slow down"},
		{name: "no reply before the deadline is retried", extra: "    timeout: 400ms\n",
			reply: firstThen(lateReply(time.Second), succeed), wantCalls: 2},
		{name: "no reply before the deadline on the last delivery dead-letters", extra: "    timeout: 300ms\n    maxDeliver: 1\n",
			reply:     lateReply(600 * time.Millisecond),
			wantCalls: 1, wantReason: "remote remote.fn: no reply before the deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each waits for its own server, mostly on delays
			env := newEnv(t)
			remote := env.startRemote(tt.reply)
			extra := tt.extra
			if !strings.Contains(extra, "backoff:") {
				extra += "    backoff: [200ms]\n"
			}
			env.startRemoteFn(remoteManifest(t, "    ackWait: 10s\n"+extra))
			env.publish("test.in", `{}`)
			if tt.wantReason != "" {
				dl := env.deadLetters(1)[0]
				if got := dl.Header.Get(wire.HeaderError); !strings.Contains(got, tt.wantReason) {
					t.Errorf("reason %q, want it to contain %q", got, tt.wantReason)
				}
			}
			runtimetest.Eventually(t, 20*time.Second, "settled", func() bool { return env.settled("TEST", "fn", 1) })
			calls := remote.Calls()
			if len(calls) != tt.wantCalls {
				t.Fatalf("remote got %d requests, want %d", len(calls), tt.wantCalls)
			}
			if tt.wantReason == "" && env.streamMsgs("DEADLETTER") != 0 {
				t.Errorf("dead-lettered, want acked")
			}
			if got := env.streamMsgs("TEST"); got != 1 {
				t.Errorf("TEST holds %d messages, want only the input: nothing published", got)
			}
			if tt.minGap > 0 {
				gap := calls[1].At.Sub(calls[0].At)
				t.Logf("second request after %s", gap)
				if gap < tt.minGap || tt.maxGap > 0 && gap >= tt.maxGap {
					t.Errorf("second request after %s, want at least %s (and under %s)", gap, tt.minGap, tt.maxGap)
				}
			}
			for i, c := range calls {
				if got := c.Header.Get(wire.HeaderRemoteDelivery); got != strconv.Itoa(i+1) {
					t.Errorf("request %d: %s = %q", i+1, wire.HeaderRemoteDelivery, got)
				}
			}
		})
	}
}

// TestRemoteNoResponders: with no instance of the remote running, the
// message is retried on the backoff and /readyz's check fails; once an
// instance starts, the next delivery is handled and the check passes.
func TestRemoteNoResponders(t *testing.T) {
	env := newEnv(t)
	r := env.startRemoteFn(remoteManifest(t, "    backoff: [300ms]\n    maxDeliver: 100\n"))
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 10*time.Second, "no responders reported", func() bool {
		s := r.rt.Stats()[0]
		return strings.Contains(s.LastError, "remote remote.fn: no responders") && s.Retried > 0 &&
			r.rt.RemotesUnanswered() != nil && strings.Contains(s.RemoteError, "no responders on remote remote.fn")
	})
	if env.streamMsgs("DEADLETTER") != 0 {
		t.Fatal("dead-lettered before the last delivery")
	}
	remote := env.startRemote(succeed)
	runtimetest.Eventually(t, 10*time.Second, "handled once the remote runs", func() bool { return env.settled("TEST", "fn", 1) })
	runtimetest.Eventually(t, 10*time.Second, "readiness passes", func() bool { return r.rt.RemotesUnanswered() == nil })
	if n := len(remote.Calls()); n != 1 {
		t.Errorf("remote got %d requests, want 1", n)
	}
	// The probe, not a request, notices the remote going away.
	remote.Stop()
	runtimetest.Eventually(t, 10*time.Second, "readiness fails after the remote stopped", func() bool {
		return r.rt.RemotesUnanswered() != nil
	})
}

// TestRemoteNoRespondersOnLastDelivery: no responders on the last
// allowed delivery dead-letters the message with the reason.
func TestRemoteNoRespondersOnLastDelivery(t *testing.T) {
	env := newEnv(t)
	env.startRemoteFn(remoteManifest(t, "    backoff: [100ms]\n    maxDeliver: 2\n"))
	env.publish("test.in", `{}`)
	dl := env.deadLetters(1)[0]
	if got := dl.Header.Get(wire.HeaderError); !strings.Contains(got, "no responders") || dl.Header.Get(wire.HeaderNumDelivered) != "2" {
		t.Errorf("dead letter reason %q at delivery %s, want no responders at 2", got, dl.Header.Get(wire.HeaderNumDelivered))
	}
}

// TestRemoteKeptAliveWhileItWorks: a remote that works longer than ackWait
// gets the message once; the keeper's InProgress keeps JetStream from
// redelivering it meanwhile.
func TestRemoteKeptAliveWhileItWorks(t *testing.T) {
	env := newEnv(t)
	remote := env.startRemote(func(req micro.Request, _ int) {
		time.Sleep(2500 * time.Millisecond) // longer than ackWait: the point of the test
		succeed(req, 0)
	})
	r := env.startRemoteFn(remoteManifest(t, "    ackWait: 1s\n    timeout: 10s\n    concurrency: 2\n"))
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 20*time.Second, "ack", func() bool { return env.settled("TEST", "fn", 1) })
	s := r.rt.Stats()[0]
	t.Logf("%d heartbeats while the remote worked 2.5s with ackWait 1s", s.Heartbeats)
	if n := len(remote.Calls()); n != 1 || s.Heartbeats == 0 || s.Redeliveries != 0 {
		t.Fatalf("remote got %d requests, %d heartbeats, %d redeliveries; want 1 request kept alive", n, s.Heartbeats, s.Redeliveries)
	}
}

// TestRemoteRequestCarriesTheRunSpan: with tracing on, the request's
// traceparent names the run's consumer span, in the publisher's trace, so
// the remote's spans are its children.
func TestRemoteRequestCarriesTheRunSpan(t *testing.T) {
	env := newTracedEnv(t)
	remote := env.startRemote(succeed)
	rt, err := New(env.nc, remoteManifest(t, ""), nil, WithLogger(testLogger()), WithTracerProvider(env.tp),
		withRemoteProbe(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	published := env.publishTraced("test.in", `{}`, "m1")
	run := env.spansNamed("process test.in", 1)[0]
	calls := remote.Calls()
	if len(calls) != 1 {
		t.Fatalf("remote got %d requests, want 1", len(calls))
	}
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), calls[0].Header))
	if got.TraceID() != published.TraceID() || got.SpanID() != run.SpanContext.SpanID() {
		t.Errorf("request traceparent %s/%s, want the run span %s/%s", got.TraceID(), got.SpanID(),
			published.TraceID(), run.SpanContext.SpanID())
	}
}

// TestRemoteProbedWhenBound: binding a remote function probes its endpoint
// at once, not a probe interval later, so /readyz fails as soon as a
// deploy adds a remote that nothing serves. Before the fix the probe was
// asked for before the new binding was among the active ones: it found no
// remote and the first real probe came an interval later.
func TestRemoteProbedWhenBound(t *testing.T) {
	env := newEnv(t)
	r := env.start(testManifest(t, ""), jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { return nil }),
		withRemoteProbe(time.Hour))
	if err := r.rt.Apply(t.Context(), remoteManifest(t, "")); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 10*time.Second, "readiness to fail for the remote nothing serves", func() bool {
		return r.rt.RemotesUnanswered() != nil
	})
}

// TestRemoteProbeDoesNotHideAReply: a probe that found no instance (a
// service micro discovery cannot see, as one in another account) must
// not overrule a reply that came after the probe was sent.
func TestRemoteProbeDoesNotHideAReply(t *testing.T) {
	s := newRemoteState("remote.fn")
	asked := time.Now()
	s.replied()
	s.probed(0, asked)
	if err := s.problem(); err != nil {
		t.Fatalf("a reply after the probe was sent, then the probe's empty answer: %v; want the reply to win", err)
	}
	s.probed(0, time.Now())
	if s.problem() == nil {
		t.Fatal("a probe sent after the last reply found no instance, and readiness passes")
	}
}

// TestRemoteUnknownBeforeObserved: before any request or probe has seen
// the endpoint, readiness must not pass; it would promise a responder
// nobody has seen.
func TestRemoteUnknownBeforeObserved(t *testing.T) {
	s := newRemoteState("remote.fn")
	if err := s.problem(); err == nil || !strings.Contains(err.Error(), "no responder known yet on remote remote.fn") {
		t.Fatalf("problem() before any observation = %v, want no responder known yet", err)
	}
	s.probed(1, time.Now())
	if err := s.problem(); err != nil {
		t.Fatalf("after a probe found one instance: %v", err)
	}
}
