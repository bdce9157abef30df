package crash

import (
	"context"
	"fmt"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
)

// Point is one place in summarize-session's handling of a single session
// where a run kills the child, restarts it, and counts what got stored.
type Point struct {
	Name string
	// Window is the TRANSCRIPTION stream's duplicate window.
	Window time.Duration
	// Outage is how long the child stays down after the kill.
	Outage time.Duration
	// NATSDown, when set, restarts nats-server inside the outage (down
	// this long, same port and store), so the child comes back to a server
	// that rebuilt its streams, consumers and message-ID memory from disk.
	NATSDown time.Duration
	// WantNotifications is what a run must store: 1, except in the
	// short-window control, which must store 2 to prove the harness can fail.
	WantNotifications int
	// arm sets the proxy's rules before session-ended is published.
	arm func(p *Proxy)
	// await returns at the kill moment; nil means the child is never killed.
	await func(ctx context.Context, h *Harness, s session) error
	// before is what must be stored when the child dies (summaries,
	// notifications); a run that killed elsewhere is reported, not counted.
	before [2]int
}

// Points are the single-session kill points of the field report, plus the
// long outage with a short (scaled-down) window and with the 24h window,
// and the 24h outage again with nats-server restarted (down natsDown) while
// the child is down.
func Points(shortWindow, outage, natsDown time.Duration) []Point {
	afterNotify := func(name string, window time.Duration, want int) Point {
		return Point{Name: name, Window: window, Outage: outage, WantNotifications: want,
			arm: armAfterNotify, await: awaitAckDropped, before: [2]int{1, 1}}
	}
	natsRestart := afterNotify("after-notify/nats-restart/window-24h", dayWindow, 1)
	natsRestart.NATSDown = natsDown
	return []Point{
		{Name: "none", Window: dayWindow, WantNotifications: 1},
		{Name: "wait", Window: dayWindow, WantNotifications: 1, await: awaitWait},
		{Name: "after-store", Window: dayWindow, WantNotifications: 1,
			arm: armAfterStore, await: awaitStored, before: [2]int{1, 0}},
		{Name: "after-notify", Window: dayWindow, WantNotifications: 1,
			arm: armAfterNotify, await: awaitAckDropped, before: [2]int{1, 1}},
		afterNotify(fmt.Sprintf("outage-%s/window-%s", short(outage), short(shortWindow)), shortWindow, 2),
		afterNotify(fmt.Sprintf("outage-%s/window-24h", short(outage)), dayWindow, 1),
		natsRestart,
	}
}

// short prints 5s rather than 5s0ms-style noise; durations here are whole
// seconds or hours.
func short(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}

// awaitWait returns in the middle of the handler's first quiet period: the
// message has been delivered (it is ack-pending) and half a quiet has passed.
func awaitWait(ctx context.Context, h *Harness, _ session) error {
	err := testkit.Poll(ctx, 5*time.Millisecond, "the delivery of session-ended", func(ctx context.Context) bool {
		info, err := consumerInfo(ctx, h.stack.js)
		return err == nil && info.NumAckPending > 0
	})
	if err != nil {
		return err
	}
	time.Sleep(h.opts.Quiet / 2)
	return nil
}

// armAfterStore freezes the connection as soon as the notification or an
// ack is sent, so neither can reach the server, whatever the timing.
func armAfterStore(p *Proxy) {
	p.Set(ClassNotify, Freeze)
	p.Set(ClassAck, Freeze)
}

// awaitStored returns once the summary is stored, and freezes the proxy.
func awaitStored(ctx context.Context, h *Harness, s session) error {
	db := h.stack.DB(h.db)
	err := testkit.Poll(ctx, time.Millisecond, "the summary", func(ctx context.Context) bool {
		n, err := summaries(ctx, db, s)
		return err == nil && n > 0
	})
	h.proxy.Freeze()
	return err
}

// armAfterNotify lets the notification through and drops the ack.
func armAfterNotify(p *Proxy) { p.Set(ClassAck, Drop) }

// awaitAckDropped returns once the proxy has dropped the ack.
func awaitAckDropped(ctx context.Context, h *Harness, _ session) error {
	return testkit.Poll(ctx, time.Millisecond, "the dropped ack", func(context.Context) bool {
		return h.proxy.Count(ClassAck, Drop) > 0
	})
}
