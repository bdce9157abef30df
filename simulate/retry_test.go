package simulate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn"
)

var errOutage = errors.New("server selection error: connection refused")

// TestRetry: a step that fails is tried again until it succeeds; a
// permanent error is returned at once; when the context ends, the last
// error comes back with the context's and the number of tries.
func TestRetry(t *testing.T) {
	tests := []struct {
		name      string
		fails     []error // one per failing try, then success
		cancelAt  int     // the try that ends the context (as a timeout would), if any
		wantTries int
		wantLogs  int     // warn lines, one per try that fails while the context lives
		wantErr   []error // errors.Is targets; none: success
		wantText  string
	}{
		{name: "outage then success", fails: []error{errOutage, errOutage}, wantTries: 3, wantLogs: 2},
		{name: "payload refused", fails: []error{fmt.Errorf("saving segment: %w", &jetfn.PayloadError{Problems: []string{"index: must be >= 0"}})},
			wantTries: 1, wantText: "index: must be >= 0"},
		{name: "client closed", fails: []error{mongo.ErrClientDisconnected}, wantTries: 1, wantErr: []error{mongo.ErrClientDisconnected}},
		{name: "credentials refused", fails: []error{fmt.Errorf("saving segment: %w", mongo.CommandError{Code: 18, Message: "Authentication failed."})},
			wantTries: 1, wantText: "Authentication failed."},
		{name: "connection closed", fails: []error{nats.ErrConnectionClosed}, wantTries: 1, wantErr: []error{nats.ErrConnectionClosed}},
		{name: "outage past the timeout", fails: []error{errOutage, errOutage, errOutage}, cancelAt: 2,
			wantTries: 2, wantLogs: 1, wantErr: []error{errOutage, context.Canceled}, wantText: "gave up after 2 tries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var logs bytes.Buffer
			tries := 0
			err := retry(ctx, slog.New(slog.NewTextHandler(&logs, nil)), "segment s:1", func(context.Context) error {
				tries++
				if tries == tt.cancelAt {
					cancel()
				}
				if tries <= len(tt.fails) {
					return tt.fails[tries-1]
				}
				return nil
			})
			if tries != tt.wantTries {
				t.Errorf("tried %d times, want %d", tries, tt.wantTries)
			}
			if len(tt.wantErr) == 0 && tt.wantText == "" && err != nil {
				t.Fatalf("retry = %v, want success", err)
			}
			for _, target := range tt.wantErr {
				if !errors.Is(err, target) {
					t.Errorf("retry = %v, want it to wrap %v", err, target)
				}
			}
			if err == nil && tt.wantText != "" || err != nil && !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("retry = %v, want it to say %q", err, tt.wantText)
			}
			if got := strings.Count(logs.String(), `step="segment s:1"`); got != tt.wantLogs {
				t.Errorf("logged %d retries, want %d:\n%s", got, tt.wantLogs, logs.String())
			}
		})
	}
}
