package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestPublishAckedWaitsForAStreamToAnswer: while a stream elects a leader
// (its leader's node SIGKILLed or paused), no server subscribes to its
// subjects and every publish gets no responders at once; nats.go retries
// that twice, 250ms apart, which is far shorter than an election (4-9s).
// The chaos harness (test/chaos) saw summarize-session's transcript.processed
// fail that way in all five deliveries while faults followed one another,
// and the session was dead-lettered with its summary stored and no
// notification. A stream that starts answering after 1.5s stands in for
// the new leader here.
func TestPublishAckedWaitsForAStreamToAnswer(t *testing.T) {
	env := newEnv(t)
	created := make(chan error, 1)
	timer := time.AfterFunc(1500*time.Millisecond, func() {
		_, err := env.js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "LATE", Subjects: []string{"late.>"}})
		created <- err
	})
	t.Cleanup(func() { timer.Stop() })
	ack, err := publishAcked(t.Context(), env.js, "late.out", []byte("x"), "fn:late.out:k1", nil)
	if err != nil {
		t.Fatalf("publish while no stream answered for 1.5s: %v", err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if ack.Stream != "LATE" || ack.Duplicate {
		t.Fatalf("ack %+v, want a first store in LATE", ack)
	}
}

func TestRetryablePublish(t *testing.T) {
	inProcess := fmt.Errorf("nats: %w", &jetstream.APIError{Code: 409, ErrorCode: errCodeMsgIDInProcess})
	wrongLast := fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence})
	tests := []struct {
		name   string
		err    error
		withID bool
		want   bool
	}{
		{name: "no stream answered", err: jetstream.ErrNoStreamResponse, want: true},
		{name: "no responders", err: nats.ErrNoResponders, want: true},
		{name: "ID in process", err: inProcess, withID: true, want: true},
		{name: "a refusal", err: wrongLast, withID: true, want: false},
		{name: "timeout with an ID", err: context.DeadlineExceeded, withID: true, want: true},
		{name: "timeout without an ID may store twice", err: context.DeadlineExceeded, want: false},
		{name: "nats timeout with an ID", err: nats.ErrTimeout, withID: true, want: true},
		{name: "anything else", err: errors.New("boom"), withID: true, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryablePublish(tt.err, tt.withID); got != tt.want {
				t.Errorf("retryablePublish(%v, %t) = %t, want %t", tt.err, tt.withID, got, tt.want)
			}
		})
	}
}
