package runtime

// Keep-alive: InProgress for every held message, buffered or running, so
// JetStream never redelivers a message this process holds; and the
// abandonment of a handler that outlived its timeout.

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// keepAlive runs the keeper until ctx is done. Every tick it sends
// InProgress for each held message, buffered or running, whose server
// timer was last reset `heartbeat` minus half a tick ago: InProgress
// resets the server's ack-wait timer. With a tick a quarter of the
// heartbeat, that is every fourth tick, even with ticks a little early or
// late: exactly one beat a message a heartbeat, and the timer never runs
// longer than heartbeat (at most ackWait/2) plus however late the tick is. It also abandons a
// running handler past the function's timeout. One ticker per function,
// not a timer per message, keeps short handlers free of cost.
func (b *binding) keepAlive(ctx context.Context, w *workers) {
	beat := inProgress(b.js.Conn())
	repeat(ctx, b.keepTick, nil, func(context.Context) {
		w.handoff.release() // the messages behind a waiting give must be seen
		res := b.unsettled.keep(b.currentHeartbeat()-b.keepTick()/2, b.bufferBeats, w.reserve, beat)
		b.stats.heartbeats.Add(uint64(res.running))
		b.stats.bufferBeats.Add(uint64(res.buffered))
		for _, d := range res.overdue {
			w.abandon(d)
		}
	})
}

// keepTick is a quarter of the heartbeat (or of the timeout, if shorter),
// so beats and abandonments happen within a quarter of their interval.
func (b *binding) keepTick() time.Duration {
	every := b.currentHeartbeat()
	if b.spec.Timeout > 0 {
		every = min(every, b.spec.Timeout)
	}
	return max(every/4, time.Millisecond)
}

// inProgress returns a beat that sends InProgress, which resets the
// server's ack-wait timer.
func inProgress(nc *nats.Conn) func(*nats.Msg) error {
	return func(m *nats.Msg) error { return reply(nc, m, inProgressBody) }
}

// keepResult is what one pass of keep did.
type keepResult struct {
	running, buffered int
	// overdue are running deliveries past their deadline, now abandoned:
	// the caller settles them and replaces their workers.
	overdue []*delivery
}

// keep sends InProgress (beat) for every held delivery whose server timer was
// last reset at least `every` ago (buffered ones only if beatBuffered), and
// abandons every running one past its deadline instead of beating it,
// calling reserve for each while the lock still keeps its worker from
// seeing that it was abandoned.
func (t *unsettledSet) keep(every time.Duration, beatBuffered bool, reserve func(), beat func(*nats.Msg) error) keepResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	var res keepResult
	now := time.Now()
	beatNow := monoOf(now)
	for d := t.head; d != nil; d = d.next {
		state := deliveryState(d.state.Load())
		// A handler cancelled in this pass gets until the next one to
		// return: a keeper that ran late must not cancel and abandon it
		// at once.
		justCancelled := state == stateRunning && d.run.cancelIfLate(now)
		if state == stateRunning && !justCancelled && d.worker.pastDeadline(now) &&
			d.move(stateRunning, stateAbandoned) {
			reserve()
			res.overdue = append(res.overdue, d)
			continue
		}
		due := beatNow-d.lastBeat >= int64(every) &&
			(state == stateRunning || state == stateBuffered && beatBuffered)
		if !due || beat(d.msg) != nil {
			continue
		}
		if state == stateRunning {
			res.running++
		} else {
			res.buffered++
		}
		d.lastBeat = beatNow
	}
	return res
}
