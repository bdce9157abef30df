package testkit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "no responders", err: nats.ErrNoResponders, want: true},
		{name: "wrapped no responders", err: fmt.Errorf("reading notifications: %w", nats.ErrNoResponders), want: true},
		{name: "request timeout", err: nats.ErrTimeout, want: true},
		{name: "context deadline", err: context.DeadlineExceeded, want: true},
		{name: "temporarily unavailable", err: &jetstream.APIError{Code: 503, ErrorCode: 10008,
			Description: "JetStream system temporarily unavailable"}, want: true},
		{name: "not the leader", err: &jetstream.APIError{Code: 500, ErrorCode: 10009}, want: true},
		{name: "no leader yet", err: fmt.Errorf("S/C: %w", ErrNoLeader), want: true},
		{name: "stalled scan", err: fmt.Errorf("scanning: %w", ErrScanStalled), want: true},
		{name: "message not found", err: jetstream.ErrMsgNotFound, want: false},
		{name: "stream not found", err: jetstream.ErrStreamNotFound, want: false},
		{name: "consumer not found", err: fmt.Errorf("x: %w", jetstream.ErrConsumerNotFound), want: false},
		{name: "canceled", err: context.Canceled, want: false},
		{name: "anything else", err: errors.New("decoding: bad JSON"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Transient(tt.err); got != tt.want {
				t.Errorf("Transient(%v) = %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	tests := []struct {
		name      string
		errs      []error // what each attempt returns; nil once they run out
		within    time.Duration
		wantCalls int // 0: as many as fit in within
		wantErr   error
	}{
		{name: "first attempt", wantCalls: 1, within: time.Second},
		{name: "after two transient errors", errs: []error{nats.ErrNoResponders, nats.ErrTimeout}, within: 10 * time.Second,
			wantCalls: 3},
		{name: "a loss is not retried", errs: []error{jetstream.ErrMsgNotFound}, within: 10 * time.Second,
			wantCalls: 1, wantErr: jetstream.ErrMsgNotFound},
		{name: "transient until the deadline", errs: []error{nats.ErrNoResponders, nats.ErrNoResponders, nats.ErrNoResponders,
			nats.ErrNoResponders, nats.ErrNoResponders}, within: 300 * time.Millisecond, wantErr: nats.ErrNoResponders},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := Retry(t.Context(), tt.within, "reading", func(ctx context.Context) error {
				calls++
				if _, ok := ctx.Deadline(); !ok {
					t.Error("an attempt without a deadline")
				}
				if calls <= len(tt.errs) {
					return tt.errs[calls-1]
				}
				return nil
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("Retry = %v, want %v", err, tt.wantErr)
			}
			if tt.wantCalls != 0 && calls != tt.wantCalls {
				t.Errorf("%d attempts, want %d", calls, tt.wantCalls)
			}
		})
	}
}
