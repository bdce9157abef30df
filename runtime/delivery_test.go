package runtime

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
)

func TestDecide(t *testing.T) {
	policy := manifest.FunctionSpec{MaxDeliver: 4, Backoff: []time.Duration{time.Second, 5 * time.Second}, AckWait: 30 * time.Second}
	fail := errors.New("mongo down")
	tests := []struct {
		name      string
		err       error
		delivered uint64
		policy    manifest.FunctionSpec
		want      outcome
	}{
		{name: "success acks", err: nil, delivered: 1, want: outcome{kind: outcomeAck}},
		{name: "success on last delivery acks", err: nil, delivered: 4, want: outcome{kind: outcomeAck}},
		{name: "malformed dead-letters at once", err: jetfn.Malformed(fail), delivered: 1, want: outcome{kind: outcomeDeadLetter}},
		{name: "wrapped permanent dead-letters", err: fmt.Errorf("saving: %w", jetfn.Permanent(fail)), delivered: 1, want: outcome{kind: outcomeDeadLetter}},
		{name: "first failure takes backoff[0]", err: fail, delivered: 1, want: outcome{kind: outcomeRetry, delay: time.Second}},
		{name: "second failure takes backoff[1]", err: fail, delivered: 2, want: outcome{kind: outcomeRetry, delay: 5 * time.Second}},
		{name: "last backoff entry repeats", err: fail, delivered: 3, want: outcome{kind: outcomeRetry, delay: 5 * time.Second}},
		{name: "failure on last delivery dead-letters", err: fail, delivered: 4, want: outcome{kind: outcomeDeadLetter}},
		{name: "retry-after takes the handler's delay", err: jetfn.RetryAfter(fail, 42*time.Millisecond), delivered: 1, want: outcome{kind: outcomeRetry, delay: 42 * time.Millisecond}},
		{name: "retry-after on last delivery dead-letters", err: jetfn.RetryAfter(fail, time.Second), delivered: 4, want: outcome{kind: outcomeDeadLetter}},
		{name: "retry-after past the bound (ackWait, the largest) is clamped to it", err: jetfn.RetryAfter(fail, 10*time.Hour),
			delivered: 1, want: outcome{kind: outcomeRetry, delay: 30 * time.Second}},
		{name: "retry-after past maxRetryAfter is clamped to it", err: jetfn.RetryAfter(fail, 10*time.Hour), delivered: 1,
			policy: manifest.FunctionSpec{MaxDeliver: 4, AckWait: 6 * time.Second, MaxRetryAfter: time.Minute},
			want:   outcome{kind: outcomeRetry, delay: time.Minute}},
		{name: "no backoff waits ackWait", err: fail, delivered: 1, policy: manifest.FunctionSpec{MaxDeliver: 4, AckWait: 6 * time.Second},
			want: outcome{kind: outcomeRetry, delay: 6 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy
			if tt.policy.MaxDeliver != 0 {
				p = tt.policy
			}
			if got := decide(tt.err, tt.delivered, &p); got != tt.want {
				t.Errorf("decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHeaderValueIsOneLine(t *testing.T) {
	got := headerValue("invalid manifest:\nline 1\r\nline 2")
	if want := "invalid manifest: line 1 line 2"; got != want {
		t.Errorf("headerValue = %q, want %q", got, want)
	}
}

func TestDeadLetterHeaders(t *testing.T) {
	d := deadLetter{function: "fn", scope: "fn", stream: "TEST", subject: "test.in", sequence: 7, numDelivered: 5, reason: "boom\nagain",
		header: map[string][]string{"Nats-Msg-Id": {"orig-1"}, "Nats-Expected-Stream": {"TEST"}, "X-Trace": {"t1"}}}
	h := d.natsMsg("deadletter.fn").Header
	want := map[string]string{"Nats-Msg-Id": "fn:TEST:7", wire.HeaderOriginalMsgID: "orig-1", "X-Trace": "t1",
		wire.HeaderNumDelivered: "5", wire.HeaderError: "boom again", "Nats-Expected-Stream": ""}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func TestRefuseUnsafe(t *testing.T) {
	tests := []struct {
		name   string
		msg    jetfn.Msg
		want   string
		maxLen int
	}{
		{name: "within limits", msg: jetfn.Msg{Data: []byte("12345"), Header: map[string][]string{"Nats-Msg-Id": {"a:b"}}}, maxLen: 5},
		{name: "payload too large", msg: jetfn.Msg{Data: []byte("123456")}, maxLen: 5, want: "payload of 6 bytes exceeds maxPayload 5"},
		{name: "control character in message ID", msg: jetfn.Msg{Header: map[string][]string{"Nats-Msg-Id": {"a\x00b"}}}, maxLen: 5, want: "header Nats-Msg-Id holds a control character"},
		// HTAB is legal in a header value (RFC 9110 field-value), and the log
		// handlers quote it; it is no reason to dead-letter a valid message.
		{name: "tab in a header value", msg: jetfn.Msg{Header: map[string][]string{"X-Trace": {"a\tb"}}}, maxLen: 5},
		{name: "tab in a header name", msg: jetfn.Msg{Header: map[string][]string{"X\tTrace": {"ab"}}}, maxLen: 5, want: "header name"},
		{name: "newline in a header value", msg: jetfn.Msg{Header: map[string][]string{"X-Trace": {"a\nb"}}}, maxLen: 5, want: "control character"},
		{name: "DEL in a header value", msg: jetfn.Msg{Header: map[string][]string{"X-Trace": {"a\x7fb"}}}, maxLen: 5, want: "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := refuseUnsafe(tt.msg, tt.maxLen)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "malformed") {
				t.Fatalf("err = %v, want a malformed error with %q", err, tt.want)
			}
		})
	}
}
