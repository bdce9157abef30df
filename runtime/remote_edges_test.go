package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// withLogTo sends the runtime's log to buf, for tests that read it.
func withLogTo(buf *runtimetest.LogBuffer) Option {
	return WithLogger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// TestRemoteRetryAfterClamped: a Retry-After past the function's bound
// (here the default, ackWait 1s, longer than the backoff) is clamped to
// it, and the log says so. Before, 10^9 seconds was honoured: the message
// would come back in 31 years, long after every duplicate window.
func TestRemoteRetryAfterClamped(t *testing.T) {
	env := newEnv(t)
	huge := map[string][]string{wire.HeaderRetryAfter: {"1000000000"}}
	remote := env.startRemote(firstThen(respondErr("503", "maintenance", huge), succeed))
	var log runtimetest.LogBuffer
	env.start(remoteManifest(t, "    ackWait: 1s\n    backoff: [200ms]\n"), nil, withRemoteProbe(200*time.Millisecond), withLogTo(&log))
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 20*time.Second, "the second request", func() bool { return len(remote.Calls()) == 2 })
	calls := remote.Calls()
	gap := calls[1].At.Sub(calls[0].At)
	t.Logf("second request after %s", gap)
	if gap < time.Second || gap > 10*time.Second {
		t.Errorf("second request after %s, want the 1s bound", gap)
	}
	if want := "(Retry-After 1000000000 s clamped to maxRetryAfter 1s)"; !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, log.String())
	}
	runtimetest.Eventually(t, 10*time.Second, "ack", func() bool { return env.settled("TEST", "fn", 1) })
}

// TestRemoteSubjectStoredByAStream: a stream the manifest does not declare
// stores the remote subject, so JetStream answers every request with a
// PubAck before the remote replies. jetfn skips the PubAck, waits for the
// remote's reply, publishes its output and acks, and warns about the
// stream once. Before, the PubAck was read as a reply that broke the
// contract, and the message was dead-lettered after the remote did its
// work.
func TestRemoteSubjectStoredByAStream(t *testing.T) {
	env := newEnv(t)
	if _, err := env.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "CAPTURE", Subjects: []string{"remote.fn"}}); err != nil {
		t.Fatal(err)
	}
	remote := env.startRemote(func(req micro.Request, _ int) {
		id := req.Headers().Get(wire.HeaderRemoteMsgID)
		time.Sleep(100 * time.Millisecond) // the remote's work: JetStream's PubAck comes first
		_ = req.Respond([]byte(`{"outputs":[{"subject":"test.out","data":"done","key":"` + id + `"}]}`))
	})
	var log runtimetest.LogBuffer
	env.start(remoteManifest(t, "    timeout: 5s\n    maxDeliver: 2\n    backoff: [100ms]\n"), nil,
		withRemoteProbe(200*time.Millisecond), withLogTo(&log))
	env.publish("test.in", `{}`)
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 20*time.Second, "both settled", func() bool { return env.settled("TEST", "fn", 2) })
	if got := env.streamMsgs("DEADLETTER"); got != 0 {
		dl := runtimetest.StreamMessages(t, env.js, "DEADLETTER")[0]
		t.Fatalf("%d dead letters, want none; the first: %s", got, dl.Header.Get(wire.HeaderError))
	}
	if n := len(remote.Calls()); n != 2 {
		t.Errorf("remote got %d requests, want 2", n)
	}
	outputs := 0
	for _, m := range runtimetest.StreamMessages(t, env.js, "TEST") {
		if m.Subject == "test.out" {
			outputs++
		}
	}
	if outputs != 2 {
		t.Errorf("%d outputs stored, want 2", outputs)
	}
	if got := strings.Count(log.String(), "a stream outside the manifest stores the remote subject"); got != 1 ||
		!strings.Contains(log.String(), "stream=CAPTURE") {
		t.Errorf("warned %d times, want once naming CAPTURE:\n%s", got, log.String())
	}
}

// TestRemoteDeadlineLeavesRoomToPublish: Jetfn-Deadline is the run's own
// deadline less remoteReplyMargin, so a remote that replies just before it
// with many outputs still gets them all published on the first delivery.
// Before, Jetfn-Deadline was jetfn's own deadline: such a reply came with
// no time left to publish, and the delivery failed.
func TestRemoteDeadlineLeavesRoomToPublish(t *testing.T) {
	const timeout, outputs = time.Second, 20
	env := newEnv(t)
	remote := env.startRemote(func(req micro.Request, _ int) {
		deadline, err := time.Parse(time.RFC3339Nano, req.Headers().Get(wire.HeaderRemoteDeadline))
		if err != nil {
			_ = req.Error("400", err.Error(), nil)
			return
		}
		id := req.Headers().Get(wire.HeaderRemoteMsgID)
		var outs []string
		for i := range outputs {
			outs = append(outs, fmt.Sprintf(`{"subject":"test.out","data":%d,"key":"%s:%d"}`, i, id, i))
		}
		// A remote that uses nearly all of its time, the point of the test;
		// 30ms short of it, so a sleep that wakes late on a loaded machine
		// still replies in time.
		time.Sleep(time.Until(deadline.Add(-30 * time.Millisecond)))
		_ = req.Respond([]byte(`{"outputs":[` + strings.Join(outs, ",") + `]}`))
	})
	env.startRemoteFn(remoteManifest(t, fmt.Sprintf("    timeout: %s\n    maxDeliver: 2\n    backoff: [100ms]\n", timeout)))
	env.publish("test.in", `{}`)
	runtimetest.Eventually(t, 20*time.Second, "settled", func() bool { return env.settled("TEST", "fn", 1) })
	calls := remote.Calls()
	if len(calls) == 0 {
		t.Fatal("no request")
	}
	c := calls[0]
	deadline, err := time.Parse(time.RFC3339Nano, c.Header.Get(wire.HeaderRemoteDeadline))
	if err != nil {
		t.Fatal(err)
	}
	// jetfn's own deadline is start + timeout, and it started before the
	// remote got the request.
	if latest := c.At.Add(timeout - remoteReplyMargin(timeout)); deadline.After(latest) {
		t.Errorf("Jetfn-Deadline %s is later than %s: less than the %s margin before jetfn's deadline (request at %s)",
			deadline.Format(remoteDeadlineLayout), latest.Format(remoteDeadlineLayout), remoteReplyMargin(timeout),
			c.At.Format(remoteDeadlineLayout))
	}
	if len(calls) != 1 || env.streamMsgs("DEADLETTER") != 0 {
		t.Errorf("%d requests and %d dead letters, want the first reply's outputs published and acked",
			len(calls), env.streamMsgs("DEADLETTER"))
	}
	if got := env.streamMsgs("TEST") - 1; got != outputs {
		t.Errorf("%d outputs stored, want %d", got, outputs)
	}
}

// TestRemoteReplyMargin: the margin is a tenth of the timeout, at least
// 100ms, at most publishTimeout, never more than half the timeout.
func TestRemoteReplyMargin(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		want    time.Duration
	}{
		{name: "a tenth", timeout: 10 * time.Second, want: time.Second},
		{name: "at least 100ms", timeout: 500 * time.Millisecond, want: 100 * time.Millisecond},
		{name: "never more than half", timeout: 150 * time.Millisecond, want: 75 * time.Millisecond},
		{name: "at most one publish attempt's bound", timeout: 5 * time.Minute, want: publishTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := remoteReplyMargin(tt.timeout); got != tt.want {
				t.Errorf("remoteReplyMargin(%s) = %s, want %s", tt.timeout, got, tt.want)
			}
		})
	}
}

// TestRemoteOversizedRequestIsPermanent: a request larger than the
// server's max_payload fails the same way on every delivery, so the first
// one settles it as a dead letter that says why; it was retried as a
// transient failure until maxDeliver. (Such a message is near max_payload
// itself, so its dead-letter copy, with more headers, does not fit either:
// the log line of that attempt is what this test reads.)
func TestRemoteOversizedRequestIsPermanent(t *testing.T) {
	env := newEnv(t)
	remote := env.startRemote(succeed)
	var log runtimetest.LogBuffer
	env.start(remoteManifest(t, "    maxDeliver: 20\n    backoff: [100ms]\n"), nil, withRemoteProbe(200*time.Millisecond), withLogTo(&log))
	// It fits as published; jetfn's request headers take it over.
	env.publish("test.in", strings.Repeat("x", int(env.nc.MaxPayload())-64))
	want := "permanent failure: remote remote.fn: the request (a payload of"
	runtimetest.Eventually(t, 10*time.Second, "the dead-letter attempt", func() bool {
		return strings.Contains(log.String(), want) || strings.Contains(log.String(), "handler failed; will retry")
	})
	line := firstLine(log.String(), "remote.fn")
	if !strings.Contains(line, "dead-letter") || !strings.Contains(line, want) ||
		!strings.Contains(line, "exceeds the server's max_payload") || !strings.Contains(line, "num_delivered=1") {
		t.Errorf("first log line about the request: %s\nwant a dead-letter attempt on delivery 1 with %q", line, want)
	}
	if n := len(remote.Calls()); n != 0 {
		t.Errorf("remote got %d requests, want none", n)
	}
}

// firstLine is the first line of s that contains sub.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestRemoteRequestDropsPublisherCopiesOfJetfnHeaders: a publisher's
// header spelled like one of jetfn's in another case does not reach the
// remote beside jetfn's (NATS headers are case-sensitive; a remote reading
// them case-insensitively could take the publisher's); other headers pass.
func TestRemoteRequestDropsPublisherCopiesOfJetfnHeaders(t *testing.T) {
	env := newEnv(t)
	remote := env.startRemote(succeed)
	env.startRemoteFn(remoteManifest(t, ""))
	msg := &nats.Msg{Subject: "test.in", Data: []byte(`{}`), Header: nats.Header{
		"jetfn-msg-id": {"forged"}, "JETFN-DEADLINE": {"2999-01-01T00:00:00.000Z"}, "jetfn-function": {"other"},
		"Jetfn-Delivery": {"9"}, "X-Kept": {"yes"},
	}}
	if _, err := env.js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 10*time.Second, "ack", func() bool { return env.settled("TEST", "fn", 1) })
	h := remote.Calls()[0].Header
	for k, v := range h {
		for _, name := range remoteRequestHeaders {
			if strings.EqualFold(k, name) && k != name {
				t.Errorf("request carries the publisher's %s: %q beside jetfn's %s", k, v, name)
			}
		}
	}
	if h.Get(wire.HeaderRemoteDelivery) != "1" || h.Get("X-Kept") != "yes" || h.Get(wire.HeaderRemoteMsgID) == "forged" {
		t.Errorf("request headers %v, want jetfn's delivery 1 and ID, and X-Kept", h)
	}
}
