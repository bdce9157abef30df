package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/nats-io/nats.go"
)

// slowHandler runs for d, then succeeds.
func slowHandler(d time.Duration) jetfn.HandlerFunc {
	return func(ctx context.Context, _ jetfn.Msg) error {
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
				// heartbeat above half of ackWait.
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

// beats counts the InProgress the keeper sends per message: the
// unsettledSet's scheduling is pure logic, tested without a server.
type beats map[*nats.Msg]int

func (b beats) beat(m *nats.Msg) error {
	b[m]++
	return nil
}

func TestUnsettledKeep(t *testing.T) {
	var tr unsettledSet
	running, buffered, settled, fresh, overdue := &nats.Msg{}, &nats.Msg{}, &nats.Msg{}, &nats.Msg{}, &nats.Msg{}
	count := beats{}
	old := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		msg      *nats.Msg
		state    deliveryState
		last     time.Time
		deadline time.Time
	}{
		{running, stateRunning, old, time.Now().Add(time.Hour)},
		{buffered, stateBuffered, old, time.Time{}},
		{settled, stateSettled, old, time.Time{}},
		{fresh, stateRunning, time.Now(), time.Time{}},
		{overdue, stateRunning, old, old},
	} {
		d := tr.add(c.msg, monoNow())
		d.state.Store(int32(c.state))
		d.lastBeat, d.worker = monoOf(c.last), &worker{deadline: c.deadline}
	}
	reserved := 0
	got := tr.keep(time.Minute, true, func() { reserved++ }, count.beat)
	if got.running != 1 || got.buffered != 1 || count[running] != 1 || count[buffered] != 1 ||
		count[settled] != 0 || count[fresh] != 0 || count[overdue] != 0 || len(got.overdue) != 1 || reserved != 1 {
		t.Fatalf("keep = %+v; beats %d %d %d %d %d; want the due running and buffered ones beaten and the overdue one abandoned",
			got, count[running], count[buffered], count[settled], count[fresh], count[overdue])
	}
	if s := deliveryState(got.overdue[0].state.Load()); s != stateAbandoned {
		t.Errorf("overdue delivery state %d, want abandoned", s)
	}
	if again := tr.keep(time.Minute, false, nil, count.beat); again.running != 0 || again.buffered != 0 || len(again.overdue) != 0 {
		t.Fatalf("second keep right away = %+v; want nothing due (and buffered beats off)", again)
	}
}

// TestUnsettledStartKeepsBeatClock: starting a buffered message must not
// move its beat clock. The server's timer has run since the last
// InProgress; before the fix start reset the clock without sending one,
// so the first running beat came a whole heartbeat after the start.
func TestUnsettledStartKeepsBeatClock(t *testing.T) {
	var tr unsettledSet
	m, count := &nats.Msg{}, beats{}
	d := tr.add(m, monoNow())
	d.lastBeat = monoOf(time.Now().Add(-time.Minute))
	if !tr.start(d, time.Time{}, &worker{}) {
		t.Fatal("start refused a buffered delivery")
	}
	if got := tr.keep(time.Minute, false, nil, count.beat); got.running != 1 || count[m] != 1 {
		t.Fatalf("keep right after start = %+v, beats %d; want the message beaten now", got, count[m])
	}
}

// TestLateKeeperCancelsBeforeItAbandons: a keeper whose tick came late
// finds a handler past both its timeout and its abandonment deadline. It
// must cancel the handler and leave it a tick to return, not abandon it
// in the same pass: before the fix a loaded machine turned about one run
// of TestTimeoutCancelsHandler in four into "still running after its
// timeout" although the handler returned on cancellation.
func TestLateKeeperCancelsBeforeItAbandons(t *testing.T) {
	var tr unsettledSet
	d := tr.add(&nats.Msg{}, monoNow())
	late := time.Now().Add(-time.Minute)
	d.run.reset(context.Background(), late, 1)
	if !tr.start(d, late, &worker{}) {
		t.Fatal("start refused a buffered delivery")
	}
	reserved := 0
	first := tr.keep(time.Hour, false, func() { reserved++ }, beats{}.beat)
	if len(first.overdue) != 0 || reserved != 0 {
		t.Fatalf("first pass abandoned %d; want the handler cancelled and left until the next pass", len(first.overdue))
	}
	select {
	case <-d.run.Done():
	default:
		t.Fatal("first pass did not cancel the late handler's context")
	}
	if second := tr.keep(time.Hour, false, func() { reserved++ }, beats{}.beat); len(second.overdue) != 1 || reserved != 1 {
		t.Fatalf("second pass abandoned %d; want the handler that ignored its cancellation abandoned", len(second.overdue))
	}
}

// TestUnsettledFinishForgets: settling a running delivery forgets it in the
// same step, so the worker does not take the set's lock again to remove it;
// one the drain returned stays until the worker forgets it.
func TestUnsettledFinishForgets(t *testing.T) {
	var tr unsettledSet
	settled, returned := tr.add(&nats.Msg{}, monoNow()), tr.add(&nats.Msg{}, monoNow())
	for _, d := range []*delivery{settled, returned} {
		if !tr.start(d, time.Time{}, &worker{}) {
			t.Fatal("start refused a buffered delivery")
		}
	}
	returned.state.Store(int32(stateReturned))
	if !tr.finish(settled) || tr.finish(returned) {
		t.Fatal("finish must settle the running delivery and refuse the returned one")
	}
	if n, m := tr.count(stateSettled), tr.count(stateReturned); n != 0 || m != 1 {
		t.Fatalf("after finish the set holds %d settled and %d returned; want 0 and 1", n, m)
	}
	tr.remove(returned)
	if m := tr.count(stateReturned); m != 0 {
		t.Fatalf("after remove the set holds %d returned; want 0", m)
	}
}
