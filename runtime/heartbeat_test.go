package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// slowHandler runs for d, then succeeds.
func slowHandler(d time.Duration) HandlerFunc {
	return func(ctx context.Context, _ Msg) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TestHeartbeatKeepsLongHandlerAlive runs a handler for three ack waits:
// with the heartbeat it is delivered once; without it (the control) the
// server redelivers it while the first run is still going.
func TestHeartbeatKeepsLongHandlerAlive(t *testing.T) {
	tests := []struct {
		name          string
		heartbeat     time.Duration
		wantRedeliver bool
	}{
		{name: "heartbeat every ackWait/3", heartbeat: 0},
		{name: "control without heartbeat", heartbeat: time.Hour, wantRedeliver: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			m := testManifest(t, "    ackWait: 500ms\n    concurrency: 2\n    maxDeliver: 10\n")
			if err := m.Validate([]string{"fn"}); err != nil {
				t.Fatal(err)
			}
			if tt.heartbeat > 0 {
				// Past validation on purpose: the manifest refuses a
				// heartbeat that is not below ackWait.
				m.Functions[0].Heartbeat = tt.heartbeat
			}
			r := env.startUnvalidated(m, slowHandler(1500*time.Millisecond))
			env.publish("test.in", `{}`)
			runtimetest.Eventually(t, 15*time.Second, "ack", func() bool {
				return r.rt.statsOf(t, "fn").Acked >= 1
			})
			s := r.rt.statsOf(t, "fn")
			t.Logf("handled %d, redeliveries %d, heartbeats %d", s.Handled, s.Redeliveries, s.Heartbeats)
			if got := s.Redeliveries > 0; got != tt.wantRedeliver {
				t.Fatalf("redelivered = %v, want %v (stats %+v)", got, tt.wantRedeliver, s)
			}
			if !tt.wantRedeliver && s.Heartbeats < 2 {
				t.Fatalf("heartbeats = %d, want at least 2 over three ack waits", s.Heartbeats)
			}
		})
	}
}

func TestHeartbeatStops(t *testing.T) {
	beats := make(chan struct{}, 100)
	hb := startHeartbeat(time.Millisecond, func() { beats <- struct{}{} })
	<-beats
	hb.stop()
	n := len(beats)
	// After stop returns no beat may start; one poll over many intervals.
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
		if len(beats) != n {
			t.Fatal("beat after stop")
		}
		time.Sleep(time.Millisecond)
	}
}
