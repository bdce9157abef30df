package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// beatCounter is a jetstream.Msg that only counts InProgress calls: the
// tracker's scheduling is pure logic, tested without a server.
type beatCounter struct {
	jetstream.Msg
	beats int
}

func (m *beatCounter) InProgress() error {
	m.beats++
	return nil
}

func TestTrackerBeat(t *testing.T) {
	var tr tracker
	running, buffered, settled, fresh := &beatCounter{}, &beatCounter{}, &beatCounter{}, &beatCounter{}
	old := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		msg   *beatCounter
		state deliveryState
		last  time.Time
	}{{running, stateRunning, old}, {buffered, stateBuffered, old}, {settled, stateSettled, old}, {fresh, stateRunning, time.Now()}} {
		d := tr.add(c.msg)
		d.state.Store(int32(c.state))
		d.lastBeat = c.last
	}
	gotRunning, gotBuffered := tr.beat(time.Minute, time.Minute)
	if gotRunning != 1 || gotBuffered != 1 || running.beats != 1 || buffered.beats != 1 || settled.beats != 0 || fresh.beats != 0 {
		t.Fatalf("beat = %d running, %d buffered; beats %d %d %d %d; want only the due running and buffered ones",
			gotRunning, gotBuffered, running.beats, buffered.beats, settled.beats, fresh.beats)
	}
	if r, b := tr.beat(time.Minute, 0); r != 0 || b != 0 {
		t.Fatalf("second beat right away = %d, %d; want none due (and buffered beats off)", r, b)
	}
}
