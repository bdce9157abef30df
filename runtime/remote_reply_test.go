package runtime

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/wire"
)

// TestDecodeOutputs is the pure half of the reply contract: what a success
// body publishes, byte for byte, and what it refuses.
func TestDecodeOutputs(t *testing.T) {
	declared := []string{"greet.done", "greet.raw.*"}
	tests := []struct {
		name    string
		body    string
		want    []string // subject, key and data of each output
		wantErr string
	}{
		{name: "no outputs", body: `{}`, want: []string{}},
		{name: "leading whitespace", body: " \n{\"outputs\":[]}", want: []string{}},
		{name: "data is the value's compact JSON", body: `{"outputs":[{"subject":"greet.done","data": { "a" : [1, 2] },"key":"k"}]}`,
			want: []string{`greet.done k {"a":[1,2]}`}},
		{name: "a string keeps its quotes", body: `{"outputs":[{"subject":"greet.done","data":"hi","key":"k"}]}`,
			want: []string{`greet.done k "hi"`}},
		{name: "null is a value", body: `{"outputs":[{"subject":"greet.done","data":null,"key":"k"}]}`,
			want: []string{`greet.done k null`}},
		{name: "dataBase64 is decoded; a wildcard output covers a literal subject",
			body: `{"outputs":[{"subject":"greet.raw.png","dataBase64":"aGk=","key":"k"}]}`, want: []string{"greet.raw.png k hi"}},
		{name: "not an object", body: `[]`, wantErr: `the body is not {"outputs":`},
		{name: "member names are exact", body: `{"Outputs":[]}`, wantErr: "Outputs"},
		{name: "duplicate member", body: `{"outputs":[],"outputs":[]}`, wantErr: "duplicate"},
		{name: "trailing data", body: `{"outputs":[]} {}`, wantErr: `the body is not {"outputs":`},
		{name: "every problem of every output at once",
			body:    `{"outputs":[{"data":1,"key":"k"},{"subject":"greet.done","data":1,"dataBase64":"aGk=","key":"a\u0000b"}]}`,
			wantErr: "outputs[0]: no subject\noutputs[1]: key holds a control character\nboth data and dataBase64; give one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outs, err := decodeOutputs([]byte(tt.body), declared)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, o := range outs {
				got = append(got, o.subject+" "+o.key+" "+string(o.data))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReplyError maps each error code to the outcome the contract gives it;
// a Retry-After past the function's bound (30s here) is clamped to it, and
// the error says so.
func TestReplyError(t *testing.T) {
	const bound = 30 * time.Second
	tests := []struct {
		name, code, retryAfter string
		wantPermanent          bool
		wantDelay              time.Duration // 0: the backoff
		wantText               string        // beside "remote r.s replied <code>: why"
	}{
		{name: "400 is permanent", code: "400", wantPermanent: true},
		{name: "499 is permanent", code: "499", wantPermanent: true},
		{name: "408 takes the backoff", code: "408"},
		{name: "429 without Retry-After takes the backoff", code: "429"},
		{name: "429 waits its Retry-After", code: "429", retryAfter: "2", wantDelay: 2 * time.Second},
		{name: "503 waits a decimal Retry-After", code: "503", retryAfter: "0.25", wantDelay: 250 * time.Millisecond},
		{name: "a Retry-After at the bound is kept", code: "503", retryAfter: "30", wantDelay: bound},
		{name: "a larger Retry-After is clamped", code: "503", retryAfter: "1000000000", wantDelay: bound,
			wantText: "(Retry-After 1000000000 s clamped to maxRetryAfter 30s)"},
		{name: "one past a float64 is clamped", code: "429", retryAfter: "1e400", wantDelay: bound, wantText: "clamped"},
		{name: "a negative Retry-After takes the backoff", code: "503", retryAfter: "-1", wantText: "not a number of seconds"},
		{name: "NaN takes the backoff", code: "503", retryAfter: "NaN", wantText: "not a number of seconds"},
		{name: "500 ignores Retry-After", code: "500", retryAfter: "2"},
		{name: "500 takes the backoff", code: "500"},
		{name: "a code that is not a number takes the backoff", code: "teapot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply := &nats.Msg{Header: nats.Header{"Nats-Service-Error-Code": {tt.code}, "Nats-Service-Error": {"why"}}}
			if tt.retryAfter != "" {
				reply.Header.Set(wire.HeaderRetryAfter, tt.retryAfter)
			}
			err := replyError(reply, "r.s", bound)
			if err == nil || !strings.Contains(err.Error(), "remote r.s replied "+tt.code+": why") ||
				!strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("err = %v, want it to name the reply and %q", err, tt.wantText)
			}
			if got := errors.Is(err, jetfn.ErrPermanent); got != tt.wantPermanent {
				t.Errorf("permanent = %v, want %v", got, tt.wantPermanent)
			}
			delay, ok := jetfn.RetryDelay(err)
			if ok != (tt.wantDelay > 0) || delay != tt.wantDelay {
				t.Errorf("retry delay %s (%v), want %s", delay, ok, tt.wantDelay)
			}
		})
	}
	if err := replyError(&nats.Msg{}, "r.s", bound); err != nil {
		t.Errorf("a reply without an error code: %v", err)
	}
}
