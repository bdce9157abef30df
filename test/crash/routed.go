package crash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/test/testkit"
	"github.com/jetfn/jetfn/wire"
)

// The routed rows are the ordered rows with the key in a header (or a
// payload field) rather than in a subject token: the server cannot hash
// those, so jetfn's router (runtime/router.go) copies the input into the
// keyed stream, one instance at a time by a lease, chaining its copies by
// message ID and starting again from its consumer's ack floor on takeover.
// That is the code most at risk under SIGKILL, so a routed row kills while
// the router copies:
//
//   - the messages are published in waves, one more than the row's
//     disruptions: the router fetches a wave for up to a second, then
//     copies it in a burst;
//   - a core subscription to the keyed stream's subjects sees every copy
//     as it is published (stored, or dropped as a duplicate), and its
//     goroutine signals the routing instance right after a random copy of
//     the wave's burst. The router's asynchronous publishes outrun the
//     harness, so by then it has usually published the whole burst, but it
//     has not acknowledged all of it on the input: the next router starts
//     again from the ack floor and must find those copies as duplicates.
//     The row's note says, per disruption, up to which input the copies
//     were published, stored and acknowledged;
//   - after a SIGKILL of the routing instance, nobody routes until its lease
//     runs out (up to 5 s); the next wave waits in the input meanwhile.
//
// The messages carry their key both in header Order-Key and in payload
// field "key", on subjects orders.sNN whose token is not their key (it
// rotates over the keys), so a function partitioned by the subject would
// break the order the checker wants. The recorder reads the key from the
// header (or the field). One routed row also has a message without either,
// in the middle: the router must dead-letter it once, with a reason naming
// the missing header or field, and hand it to no handler (the recorder
// would key it by its subject, s00, on which nothing was published, and the
// checker would say so).

// Where a routed row's key is. RoutedBySubject is a control that must
// fail: the function keyed by the subject's token 2, which is not the
// messages' key, so that the server partitions them and a key's messages
// run in several partitions at once.
const (
	RoutedByHeader  = "header"
	RoutedByField   = "field"
	RoutedBySubject = "subject"
	orderKeyHeader  = "Order-Key"
	orderKeyField   = "key"
)

// routedFromHeader is the header a routed copy names its input message
// in: "<stream> <seq> <subject> <identity>" (runtime/router.go's
// routedHeader).
const routedFromHeader = "Jetfn-Routed-From"

// keySource is the manifest's key of the row's function.
func (o Ordered) keySource() string {
	switch o.Routed {
	case RoutedByHeader:
		return "{header: " + orderKeyHeader + "}"
	case RoutedByField:
		return "{field: " + orderKeyField + "}"
	}
	return "{token: 2}"
}

// routedKeyName names the routed key as a dead letter's reason does.
func (o Ordered) routedKeyName() string {
	switch o.Routed {
	case RoutedByField:
		return "field " + orderKeyField
	case RoutedBySubject:
		return "subject token 2 (control)"
	}
	return "header " + orderKeyHeader
}

// jetfnRoutes reports whether jetfn's router copies the row's messages:
// keyed by a header or a field. Other rows (the controls) have no copies
// to watch, so their disruptions come at random outputs.
func (o Ordered) jetfnRoutes() bool {
	return o.keyed() && (o.Routed == RoutedByHeader || o.Routed == RoutedByField)
}

// routerDurable is the router's consumer on the input stream
// (manifest.FunctionSpec.RouterDurable).
const routerDurable = orderedFunction + "-router"

// routingEvidence is what a routed row saw of its router.
type routingEvidence struct {
	mu sync.Mutex
	// ids are the copies' message IDs seen, total the copies (a copy
	// published again after a takeover counts again).
	ids   map[string]bool
	total int
	// lastInput is the largest input sequence a copy was seen of.
	lastInput uint64
	seen      []time.Time
	// deadIDs counts the dead-letter publishes seen per message ID.
	deadIDs map[string]int
	// target and reached wake await once len(ids) reaches target, after
	// fire (a signal) is done on the subscription's goroutine.
	target  int
	reached chan struct{}
	fire    func()
	// handovers are when the routing instance was killed or stopped, and
	// when what it had sent stopped arriving (quiet); inFlight counts
	// those with copies not acknowledged on the input.
	handovers []handover
	inFlight  int
	subs      []*nats.Subscription
}

// watchRouting subscribes the harness to the router's copies and the
// function's dead letters. Listening changes nothing the server does.
func (h *Harness) watchRouting() (*routingEvidence, error) {
	w := &routingEvidence{ids: map[string]bool{}, deadIDs: map[string]int{}}
	prefix := "jetfn.keyed." + orderedFunction + ".>"
	for subject, cb := range map[string]nats.MsgHandler{prefix: w.copied, "deadletter." + orderedFunction: w.deadLettered} {
		sub, err := h.stack.nc.Subscribe(subject, cb)
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("watching %s: %w", subject, err)
		}
		w.subs = append(w.subs, sub)
	}
	if err := h.stack.nc.FlushTimeout(5 * time.Second); err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

func (w *routingEvidence) stop() {
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
	w.subs = nil
}

func (w *routingEvidence) copied(m *nats.Msg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total++
	w.ids[m.Header.Get(jetstream.MsgIDHeader)] = true
	w.seen = append(w.seen, time.Now())
	w.lastInput = max(w.lastInput, routedFrom(m.Header))
	if w.reached != nil && len(w.ids) >= w.target {
		if w.fire != nil {
			w.fire()
		}
		close(w.reached)
		w.reached, w.fire = nil, nil
	}
}

func (w *routingEvidence) deadLettered(m *nats.Msg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadIDs[m.Header.Get(jetstream.MsgIDHeader)]++
}

// copies are the distinct copies seen so far.
func (w *routingEvidence) copies() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}

// await returns as soon as n distinct copies have been seen, after fire
// (if set), which the subscription's goroutine runs the moment it sees
// copy n, so that a signal lands while the router copies rather than a
// goroutine wake-up later. A minute without reaching n is a stall.
func (w *routingEvidence) await(ctx context.Context, n int, fire func()) error {
	w.mu.Lock()
	if len(w.ids) >= n {
		w.mu.Unlock()
		if fire != nil {
			fire()
		}
		return nil
	}
	ch := make(chan struct{})
	w.target, w.reached, w.fire = n, ch, fire
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return fmt.Errorf("%d copies routed in a minute, waiting for %d", w.copies(), n)
	}
}

// String is the routed row's note: the copies, how long routing stopped
// at each handover, the dead-letter publishes. Empty for a row that does
// not route.
func (w *routingEvidence) String() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var gaps []string
	for _, h := range w.handovers {
		gap := "never"
		for _, s := range w.seen {
			if s.After(h.quiet) {
				gap = fmtDur(s.Sub(h.at))
				break
			}
		}
		gaps = append(gaps, gap)
	}
	dead := 0
	for _, n := range w.deadIDs {
		dead += n
	}
	s := fmt.Sprintf("; router: %d copies published for %d messages (%d again after a takeover)", w.total, len(w.ids),
		w.total-len(w.ids))
	if len(gaps) > 0 {
		s += fmt.Sprintf(", %d of %d handovers with copied input not acknowledged, routing resumed %s after them",
			w.inFlight, len(w.handovers), strings.Join(gaps, ", "))
	}
	return s + fmt.Sprintf(", dead-letter publishes seen %d", dead)
}

// routedRun publishes a routed row's messages in waves and disrupts once
// per wave but the last, right after a random copy of the wave's burst.
func (h *Harness) routedRun(ctx context.Context, o Ordered, ev *orderedEvidence) error {
	w, err := h.watchRouting()
	if err != nil {
		return err
	}
	ev.routing = w
	defer w.stop()
	var steps []disruption
	switch o.Kind {
	case OrderedKill:
		for range o.Kills {
			steps = append(steps, h.killDisruption(ctx, ev))
		}
	case OrderedInstances:
		steps = h.instanceDisruptions(ctx, ev)
	}
	msgs := h.orderMessages(o)
	next := 0
	publish := func(upTo int) error {
		for ; next < upTo; next++ {
			in, err := h.publishOrder(ctx, msgs[next])
			if err != nil {
				return err
			}
			if in.Key == "" {
				ev.keyless = &in
				continue
			}
			ev.inputs = append(ev.inputs, in)
		}
		return nil
	}
	for i, s := range steps {
		if err := publish(len(msgs) * (i + 1) / (len(steps) + 1)); err != nil {
			return err
		}
		if err := h.routedStep(ctx, o, ev, s); err != nil {
			return err
		}
	}
	if err := publish(len(msgs)); err != nil {
		return err
	}
	return h.settleRouted(ctx, o, len(ev.inputs))
}

// routedStep waits for a random copy among those of the messages
// published and not copied yet (for a control that routes nothing, a
// random output), disrupts, notes how far the router was, and
// restarts if the step does.
func (h *Harness) routedStep(ctx context.Context, o Ordered, ev *orderedEvidence, s disruption) error {
	goal, done := len(ev.inputs), ev.routing.copies()
	if !o.jetfnRoutes() {
		done, _ = h.handled(ctx)
	}
	at := min(goal, done+1+rand.IntN(max(1, goal-done)))
	var err error
	if o.jetfnRoutes() {
		var fire func()
		if s.target != nil && *s.target != nil {
			c := *s.target
			fire = func() { _ = c.Signal(s.signal) }
		}
		err = ev.routing.await(ctx, at, fire)
	} else {
		_, err = h.awaitHandled(ctx, at)
	}
	if err != nil {
		return err
	}
	when := time.Now() // the signal's, sent as the copy arrived
	if err := s.do(); err != nil {
		return err
	}
	state, quiet := h.routerState(ctx, ev.routing), when
	if s.handover {
		state, quiet = h.quietRouterState(ctx, ev.routing)
		ev.routing.mu.Lock()
		ev.routing.handovers = append(ev.routing.handovers, handover{at: when, quiet: quiet})
		if state.published > state.acked {
			ev.routing.inFlight++
		}
		ev.routing.mu.Unlock()
	}
	h.opts.Log.Info("routed step", "step", s.name, "at", at, "router", state)
	ev.steps = append(ev.steps, fmt.Sprintf("%s at copy %d (%s)", s.name, at, state))
	if s.then != nil {
		return s.then()
	}
	return nil
}

// handover is when the routing instance was killed or stopped, and when
// the copies it had sent stopped arriving: copies seen after that are the
// next router's.
type handover struct{ at, quiet time.Time }

// quietRouterState is routerState once it holds still for 100ms, for at
// most a second: what a killed instance had written still reaches the
// server through the proxy for a moment, and its copies the harness. It
// returns the state and when it was first read.
func (h *Harness) quietRouterState(ctx context.Context, w *routingEvidence) (routerState, time.Time) {
	at, s := time.Now(), h.routerState(ctx, w)
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		again := h.routerState(ctx, w)
		if again == s {
			break
		}
		at, s = time.Now(), again
	}
	return s, at
}

// routerState is how far the router was: the last input a copy was seen
// of, the last one the keyed stream stored a copy of, and the router
// consumer's ack floor. Stored beyond the ack floor are copies a new
// router must find as duplicates.
type routerState struct {
	published, stored, acked uint64
	// handled: the keyed stream's last copy is gone (a work queue), so
	// stored is not known.
	handled bool
}

func (s routerState) String() string {
	stored := fmt.Sprintf("stored up to #%d", s.stored)
	if s.handled {
		stored = "the last copy stored handled already"
	}
	return fmt.Sprintf("copies published up to input #%d, %s, acked up to #%d", s.published, stored, s.acked)
}

func (h *Harness) routerState(ctx context.Context, w *routingEvidence) routerState {
	w.mu.Lock()
	s := routerState{published: w.lastInput}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if st, err := h.stack.js.Stream(ctx, manifest.KeyedStreamPrefix+orderedFunction); err == nil {
		if last := st.CachedInfo().State.LastSeq; last > 0 {
			if m, err := st.GetMsg(ctx, last); err == nil {
				s.stored = routedFrom(m.Header)
			} else if errors.Is(err, jetstream.ErrMsgNotFound) {
				s.handled = true
			}
		}
	}
	if info, err := durableInfo(ctx, h.stack.js, ordersStream, routerDurable); err == nil {
		s.acked = info.AckFloor.Stream
	}
	return s
}

// routedFrom is the input sequence a routed copy names, or 0.
func routedFrom(h nats.Header) uint64 {
	if f := strings.Fields(h.Get(routedFromHeader)); len(f) > 1 {
		if seq, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			return seq
		}
	}
	return 0
}

// settleRouted waits as settleOrdered does, and until the router has
// acknowledged every input message (the keyless one once dead-lettered).
func (h *Harness) settleRouted(ctx context.Context, o Ordered, total int) error {
	if err := h.settleOrdered(ctx, total, o.keyed()); err != nil || !o.jetfnRoutes() {
		return err
	}
	return testkit.Poll(ctx, 20*time.Millisecond, "every input message routed", func(ctx context.Context) bool {
		info, err := durableInfo(ctx, h.stack.js, ordersStream, routerDurable)
		return err == nil && settled(info)
	})
}

// checkKeyless wants exactly one dead letter, of the keyless message, with
// the original's bytes, ID and subject and a reason naming the missing
// header or field; each difference is a row error. It returns the note.
// That no handler ran it is the order checker's (a run keyed s00).
func (h *Harness) checkKeyless(ctx context.Context, o Ordered, ev *orderedEvidence, row *Row) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	k := ev.keyless
	dls, err := storedMsgs(ctx, h.stack.js, deadLetterStream, "deadletter."+orderedFunction, ev.dlFrom)
	if err != nil {
		row.Errors = append(row.Errors, "reading the dead letters: "+err.Error())
		return ""
	}
	var bad []string
	var reason string
	mine := 0
	want := map[string]string{
		wire.HeaderFunction:        orderedFunction,
		wire.HeaderOriginalStream:  ordersStream,
		wire.HeaderOriginalSubject: "orders.s00",
		wire.HeaderOriginalMsgID:   k.MsgID,
	}
	for _, dl := range dls {
		seq := dl.Header.Get(wire.HeaderStreamSequence)
		if seq != strconv.FormatInt(k.Seq, 10) {
			bad = append(bad, fmt.Sprintf("a dead letter of input #%s, which has its key", seq))
			continue
		}
		mine++
		reason = dl.Header.Get(wire.HeaderError)
		if !strings.Contains(reason, o.routedKeyName()) {
			bad = append(bad, fmt.Sprintf("reason %q does not name %s", reason, o.routedKeyName()))
		}
		if !bytes.Equal(dl.Data, []byte(`{"keyless":true}`)) {
			bad = append(bad, fmt.Sprintf("data %q, want the original's", dl.Data))
		}
		for _, h := range sortedKeys(want) {
			if got := dl.Header.Get(h); got != want[h] {
				bad = append(bad, fmt.Sprintf("header %s %q, want %q", h, got, want[h]))
			}
		}
	}
	if mine != 1 {
		bad = append(bad, fmt.Sprintf("%d dead letters of the keyless input #%d, want 1", mine, k.Seq))
	}
	for _, b := range bad {
		row.Errors = append(row.Errors, "keyless message: "+b)
	}
	return fmt.Sprintf("; the keyless input #%d dead-lettered %d time(s), reason %q", k.Seq, mine, reason)
}
