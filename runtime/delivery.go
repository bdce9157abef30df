package runtime

// This file is one delivery's life in a binding, in the order it happens:
//
//	credit taken ─▶ pulled ─▶ buffered ─▶ running ─▶ settled: Ack, NakWithDelay, or dead letter + Term
//	                             │           ├──────▶ abandoned: its handler ignored the timeout; a new
//	                             │           │        worker settles it as a failed attempt
//	                             └───────────┴──────▶ returned: the drain Naks it for another instance
//
// While it is buffered or running the keeper sends InProgress for it every
// heartbeat, so JetStream never redelivers a message this process holds.
// Whichever way it ends, it is forgotten (settling forgets it in the same
// step) and its credit freed.
// A delivery's state moves by compare-and-swap only, so it is settled once.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/nats-io/nats.go"
)

// deliveryState is where one delivered message is in its life.
type deliveryState int32

const (
	// stateBuffered: pulled, waiting for a free worker.
	stateBuffered deliveryState = iota
	// stateRunning: a handler has it.
	stateRunning
	// stateSettled: acked, nak'd or dead-lettered by its handler.
	stateSettled
	// stateReturned: given back with a Nak by the drain.
	stateReturned
	// stateAbandoned: its handler outlived the function's timeout; the
	// message is settled as a failure without waiting for it.
	stateAbandoned
)

// delivery is one message between its pull and its settlement. Its state
// moves by compare-and-swap only, so a message is settled once: by its
// handler, by the keeper that abandons it, or by the drain, never twice.
//
// It is all a pulled message costs the runtime, one allocation; its
// abandonment deadline lives in the worker, and the handler's view of it is
// read from the message again where it is needed after the run (metaOf).
type delivery struct {
	msg   *nats.Msg
	state atomic.Int32
	// lastBeat, guarded by unsettledSet.mu, is when the server's ack-wait
	// timer was last reset (a monotonic instant, monoNow): the pull, then
	// every InProgress. worker is set when a worker starts it, before its
	// state says so (start).
	lastBeat int64
	worker   *worker
	// run is the handler's context while it runs. It is the message's own,
	// never reused, so a context a handler kept stays this message's.
	run runContext
	// attempt is the run's number for maxDeliver and the backoff
	// (attempts.go), set when it starts.
	attempt attempt
	// identity names the stream incarnation the consumer read when the
	// message arrived: a message waiting in the buffer while the handle
	// follows a stream made again is still the old incarnation's.
	identity string
	// prev and next link the unsettledSet.
	prev, next *delivery
}

func (d *delivery) move(from, to deliveryState) bool {
	return d.state.CompareAndSwap(int32(from), int32(to))
}

// ---- Arrived: the puller's subscription receives it (pull.go asks for it), and it is held.

// receive handles everything the server sends to the inbox: a message goes
// to a worker or the buffer (or straight back, once the run is stopping),
// a status returns credits.
func (p *puller) receive(m *nats.Msg) {
	now := monoNow() // one clock read a message: it also starts the delivery's beat clock
	p.lastHeard.Store(now)
	if isPullStatus(m) {
		p.status(m)
		return
	}
	p.credits.arrived()
	if p.stopping.Err() != nil {
		p.b.returnLater(m)
		p.credits.release(1)
		return
	}
	d := p.b.unsettled.add(m, now)
	d.identity = p.b.consumer.streamIdentity()
	// A rate-limited function's message waits here for its turn, kept
	// alive like a buffered one; it is the only one pulled (binding.pull).
	if p.b.rate != nil && !p.turn() || !p.handoff.give(d, p.stopping.Done(), queuedBehind) {
		// The run is stopping (the buffer was full, or the turn never
		// came): the message goes back, unless the drain returned it
		// already.
		if d.move(stateBuffered, stateReturned) {
			p.b.returnLater(m)
		}
		p.b.unsettled.remove(d)
		p.credits.release(1)
	}
}

// turn waits for a rate-limited message's turn, then lets the pull loop
// ask for the next one; false if the run stopped first.
func (p *puller) turn() bool {
	ok := p.b.rate.await(p.stopping)
	p.credits.limitRaised() // the pull loop waits for no message to wait
	return ok
}

// isPullStatus tells the server's status replies to a pull request from
// the messages it delivers. Both can have an empty body and a Status
// header (a publisher may store one: nats.go's own Consume reads such a
// message as a status), but only a delivered message has a reply subject,
// its $JS.ACK one; a status has none.
func isPullStatus(m *nats.Msg) bool {
	return m.Reply == "" && len(m.Data) == 0 && m.Header.Get("Status") != ""
}

// queuedBehind is how many messages wait in the subscription's queue
// behind d, whose callback runs: nats.go counts d as pending until the
// next callback starts.
func queuedBehind(d *delivery) int {
	pending, _, _ := d.msg.Sub.Pending()
	return pending - 1
}

// unsettledSet holds every delivery not yet settled, for the keeper and for
// the drain: a list threaded through the deliveries themselves, so holding
// a message costs no allocation beyond its delivery.
type unsettledSet struct {
	mu   sync.Mutex
	head *delivery
}

// add holds m, pulled at now (monoNow): the server's ack-wait timer
// started no earlier.
func (t *unsettledSet) add(m *nats.Msg, now int64) *delivery {
	d := &delivery{msg: m, lastBeat: now}
	t.mu.Lock()
	d.next = t.head
	if t.head != nil {
		t.head.prev = d
	}
	t.head = d
	t.mu.Unlock()
	return d
}

func (t *unsettledSet) remove(d *delivery) {
	t.mu.Lock()
	t.unlink(d)
	t.mu.Unlock()
}

// unlink takes d out of the list; a no-op if it is not in it. t.mu is held.
func (t *unsettledSet) unlink(d *delivery) {
	if d.prev != nil {
		d.prev.next = d.next
	} else if t.head == d {
		t.head = d.next
	}
	if d.next != nil {
		d.next.prev = d.prev
	}
	d.prev, d.next = nil, nil
}

func (t *unsettledSet) count(state deliveryState) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for d := t.head; d != nil; d = d.next {
		if deliveryState(d.state.Load()) == state {
			n++
		}
	}
	return n
}

// processStart anchors the runtime's monotonic instants, which every
// message reads: nanoseconds since it, read with one clock call
// (time.Since) where time.Now makes two, and blind to steps of the wall
// clock.
var processStart = time.Now()

// monoNow is the monotonic instant now.
func monoNow() int64 { return int64(time.Since(processStart)) }

// monoOf is the monotonic instant of t, which must carry a monotonic
// reading (time.Now's do, and what Add makes of them).
func monoOf(t time.Time) int64 { return int64(t.Sub(processStart)) }

// ---- Handed over: to a waiting worker, or to the buffer.

// handoff is how a pulled delivery reaches a worker. While the buffer is
// empty and fewer messages than workers wait behind it, the puller of a
// function with several workers hands a delivery straight to a worker and,
// when every worker is busy, waits for the first to come back, as nats.go's
// Consume does. Otherwise, or once that wait is released, the delivery goes
// to the buffer, and while the buffer holds anything every delivery goes
// behind it.
//
// Waiting matters for speed: a worker that comes back to a waiting puller
// takes its next message without parking, so the acks of several messages
// leave in one write. Buffering every delivery at once sent about two acks
// a write at concurrency 16 where Consume sends four (issue 16: 0.48 write
// system calls a message against 0.23; 0.24 against 0.23 with the wait).
// With as many messages waiting behind as there are workers (a backlog),
// no worker will park soon anyway, and waiting would only cost two
// goroutine switches a message: waiting on every message, a backlog of
// 20,000 drained at concurrency 1 took 1.20× raw's CPU a message; with the
// backlog buffered, 1.04×. A single worker gains nothing from the wait
// either (noop c=1: 0.68–0.70 writes a message with it, raw's 0.69) and
// pays the same switches: 1.18× raw's CPU in the budget c=1 P=1 row with
// it, 0.97× without (and 1.16 writes a message, against 0.69 without: the
// message that waits is not in the buffer, so the puller's "nothing
// buffered" refill sends more requests).
//
// The wait is bounded, because while the puller waits the messages behind
// it sit in nats.go's queue, where neither the keeper nor the pull watch
// sees them. Every tick of either releases the handoff: a waiting delivery,
// already in the unsettled set and kept alive, goes to the buffer, and so
// does every delivery after it until one arrives with nothing queued
// behind it, so none of those that queued during the waits waits again.
// So a message is unseen for at most one keeper tick (a quarter of its
// heartbeat) or one pull-watch tick (pullHeartbeat/2), whichever comes
// first, and its first InProgress lands within 1.25 heartbeats of its
// delivery: at most 5/8 of ackWait, since heartbeat is at most half.
type handoff struct {
	// buffer holds the deliveries that found every worker busy. It holds
	// concurrency plus the prefetch allowance, all the credits allow, so a
	// give blocks on it only for stragglers of a request given up on
	// (credits), and only until the run is stopping.
	buffer chan *delivery
	// direct is unbuffered: a send completes only as a worker takes it.
	direct chan *delivery
	// spill is unbuffered: a receive ends the puller's wait on direct.
	spill chan struct{}
	// flush, set by release, buffers every delivery until one comes with
	// nothing queued behind it.
	flush atomic.Bool
	// workers is the binding's concurrency: with that many messages behind
	// a delivery, or with a single worker, it is buffered without waiting.
	workers int
	// urgent holds the buffered deliveries that carry priorityHeader
	// (manifest priorityHeader): workers take them before the buffer's.
	// Nil, and never read, without one.
	urgent         chan *delivery
	priorityHeader string
}

func newHandoff(capacity, workers int) *handoff {
	return &handoff{buffer: make(chan *delivery, capacity),
		direct: make(chan *delivery), spill: make(chan struct{}), workers: workers}
}

// prioritize makes deliveries carrying header (any value but empty) go
// before every other buffered one. Set before the first give.
func (h *handoff) prioritize(header string) *handoff {
	if header != "" {
		h.urgent, h.priorityHeader = make(chan *delivery, cap(h.buffer)), header
	}
	return h
}

// isUrgent reports whether d carries the priority header.
func (h *handoff) isUrgent(d *delivery) bool {
	return h.urgent != nil && d.msg != nil && d.msg.Header.Get(h.priorityHeader) != ""
}

// give hands d to a worker, or to the buffer, in this order:
//   - if it carries the priority header, to a worker already waiting, else
//     to the urgent queue, which workers empty before the buffer;
//   - after a release, to the buffer, until a delivery comes with nothing
//     behind it;
//   - while the buffer is empty, to a worker already waiting;
//   - while the buffer is empty, with several workers and fewer messages
//     behind d than workers, to the first worker that comes back, unless
//     the wait is released or the run is stopping (the workers return what
//     they take then);
//   - else to the buffer.
//
// behind counts the messages queued after d; it is asked only where the
// order above needs it, as it takes the subscription's lock. Only the
// puller gives, so while it waits on direct the buffer is empty and order
// is kept. give reports false only for a delivery it did not place: the
// buffer was full (stragglers) and the run is stopping, so the caller must
// return it.
func (h *handoff) give(d *delivery, stopping <-chan struct{}, behind func(*delivery) int) bool {
	if h.isUrgent(d) {
		select {
		case h.direct <- d: // a worker was waiting
			return true
		default:
			return queueOrStop(h.urgent, d, stopping) // before everything buffered
		}
	}
	if h.flush.Load() {
		if behind(d) <= 0 {
			h.flush.Store(false) // what queued before the release is through
		}
		return h.bufferOrStop(d, stopping)
	}
	if len(h.buffer) == 0 {
		select {
		case h.direct <- d: // a worker was waiting
			return true
		default:
		}
		if h.workers > 1 && behind(d) < h.workers {
			select {
			case h.direct <- d:
				return true
			case <-h.spill:
			case <-stopping:
			}
		}
	}
	return h.bufferOrStop(d, stopping)
}

// bufferOrStop buffers d, waiting while the buffer is full until the run is
// stopping: no send may still wait once the puller has stopped, since the
// buffer is closed then (a send that waited on it panicked, in the middle
// of the drain).
func (h *handoff) bufferOrStop(d *delivery, stopping <-chan struct{}) bool {
	return queueOrStop(h.buffer, d, stopping)
}

// queueOrStop sends d on queue, the buffer or the urgent queue, as
// bufferOrStop describes.
func queueOrStop(queue chan *delivery, d *delivery, stopping <-chan struct{}) bool {
	select {
	case queue <- d:
		return true
	default:
	}
	select {
	case queue <- d:
		return true
	case <-stopping:
		return false
	}
}

// take waits for the next delivery, an urgent one first; false once the
// buffer is closed and nothing urgent is left.
func (h *handoff) take() (*delivery, bool) {
	select {
	case d := <-h.urgent:
		return d, true
	default:
	}
	select {
	case d := <-h.urgent:
		return d, true
	case d, ok := <-h.buffer:
		if !ok {
			select {
			case d := <-h.urgent:
				return d, true
			default:
			}
		}
		return d, ok
	case d := <-h.direct:
		return d, true
	}
}

// release ends a give that waits for a worker, if one does, and buffers
// the deliveries after it until the queue behind them is empty.
func (h *handoff) release() {
	h.flush.Store(true)
	select {
	case h.spill <- struct{}{}:
	default:
	}
}

// buffered is how many deliveries wait in the buffer, urgent ones too.
func (h *handoff) buffered() int { return len(h.buffer) + len(h.urgent) }

// close ends the workers' takes once the buffer is empty. Nothing may give
// after it: it is called once the puller's subscription has ended (stop
// waits a pull's wait for its last callback).
func (h *handoff) close() { close(h.buffer) }

// ---- Running: a worker takes it and calls the handler.

// loop handles the messages handed to it until the buffer is closed. Once
// stopping is done it starts nothing more: it returns what it takes, as
// the drain does, so a shutdown never begins new work.
func (w *workers) loop(wk *worker) {
	for {
		d, ok := w.handoff.take()
		if !ok {
			return
		}
		if w.stopping.Err() != nil {
			if d.move(stateBuffered, stateReturned) {
				w.b.returnUnstarted(d.msg)
			}
			w.done(d)
			continue
		}
		if !w.pass() {
			if d.move(stateBuffered, stateReturned) {
				w.b.returnUnstarted(d.msg)
			}
			w.done(d)
			continue
		}
		state := w.b.process(w.handlerCtx, d, wk)
		w.leave()
		switch state {
		case stateAbandoned:
			// d was settled when its handler was abandoned; a replacement
			// holds this worker's place, unless the slot was retired: then
			// this worker comes back to it.
			if w.reclaim() {
				w.reserve()
				w.run(nil, wk.stats, true)
				w.credits.limitRaised()
			}
			return
		case stateSettled:
			w.credits.release(1) // settling forgot it
		default:
			w.done(d)
		}
	}
}

// done forgets a delivery and frees its credit for the puller.
func (w *workers) done(d *delivery) {
	w.b.unsettled.remove(d)
	w.credits.release(1)
}

// process handles one delivery on worker wk, then settles it, and returns
// the state it left the delivery in; a settled one is already forgotten.
// The keeper heartbeats it while the handler runs, and abandons it if the
// handler outlives the timeout.
func (b *binding) process(ctx context.Context, d *delivery, wk *worker) deliveryState {
	m := d.msg
	msg, err := b.toMsgOf(m, d.identity)
	if err != nil {
		b.log.Error("reading message metadata", "err", err)
		return stateBuffered // never started: the caller forgets it
	}
	// The context ends at the timeout; the handler is abandoned a tick
	// later, so one that returns when its context is cancelled never is.
	start := time.Now()
	var timeout, deadline time.Time
	if b.spec.Timeout > 0 {
		timeout = start.Add(b.spec.Timeout)
		deadline = timeout.Add(b.keepTick())
	}
	d.run.reset(ctx, timeout, msg.NumDelivered)
	if !b.unsettled.start(d, deadline, wk) {
		return stateReturned // the drain took it
	}
	if b.backfill != nil && !b.backfill.hands(msg.Subject, msg.StreamSequence) {
		return b.passOver(d) // the main consumer delivers it, or did
	}
	if b.keyRate != nil {
		if ok, wait := b.keyTurn(ctx, m, msg); !ok {
			if !b.unsettled.finish(d) {
				return b.unfinished(d)
			}
			b.deferToKeyTurn(ctx, m, msg, wait)
			return stateSettled // back on the server until its key's turn
		}
	}
	if why := b.staleTick(ctx, m, msg); why != "" {
		if !b.unsettled.finish(d) {
			return b.unfinished(d)
		}
		b.skipTick(m, msg, why)
		return stateSettled
	}
	a := b.attempts.next(ctx, b.spec.Name, msg, func(prior uint64) bool { return prior < uint64(b.spec.MaxDeliver) })
	a.recorded = a.recorded || b.tickRunStarts(ctx, msg)
	if !b.unsettled.setAttempt(d, a) {
		return b.unfinished(d) // abandoned while its run was being counted
	}
	b.noteHead(m, msg)
	if d.attempt.n > uint64(b.spec.MaxDeliver) {
		// Every allowed run ended without a result: the consumer has one
		// delivery more than maxDeliver for exactly this (attempts.go).
		if !b.unsettled.finish(d) {
			return b.unfinished(d)
		}
		cause := errExhausted(b.spec.MaxDeliver)
		b.deadLetter(m, msg, cause, d.attempt)
		b.recordRun(d, msg, start, 0, cause) // console: recent runs
		return stateSettled
	}
	wk.stats.started.Add(1)
	defer wk.stats.ended.Add(1) // after the settle: its publish is in flight too
	if msg.NumDelivered > 1 {
		b.stats.redeliveries.Add(1)
	}
	herr := refuseUnsafe(msg, b.spec.MaxPayload)
	if herr == nil {
		herr = b.call(d, msg)
	}
	took := time.Since(start)
	wk.stats.observe(took)
	wk.recent.add(took, &b.stats.ewma)
	if b.observe != nil {
		b.observe(b.spec.Name, took)
	}
	wk.stats.handled.Add(1)
	if !b.unsettled.finish(d) {
		return b.unfinished(d) // this late result is dropped
	}
	if b.settle(m, msg, herr, d.attempt) {
		wk.stats.acked.Add(1)
	}
	b.recordRun(d, msg, start, took, herr) // console: recent runs
	return stateSettled
}

// toMsg is the handler's view of a message the consumer delivers now, read
// from its reply subject.
func (b *binding) toMsg(m *nats.Msg) (jetfn.Msg, error) {
	return b.toMsgOf(m, b.consumer.streamIdentity())
}

// toMsgOf is the handler's view of a message the consumer delivered while
// it read the stream incarnation named identity.
func (b *binding) toMsgOf(m *nats.Msg, identity string) (jetfn.Msg, error) {
	meta, ok := parseOwnAckReply(m.Reply, b.ackPrefix, b.spec.Stream)
	if !ok {
		return jetfn.Msg{}, fmt.Errorf("reply subject %q is not a JetStream ack subject", m.Reply)
	}
	msg := jetfn.Msg{
		Subject:        m.Subject,
		Data:           m.Data,
		Header:         jetfn.Header(m.Header),
		Stream:         meta.stream,
		StreamSequence: meta.streamSeq,
		StreamIdentity: identity,
		NumDelivered:   meta.numDelivered,
		Published:      time.Unix(0, meta.timestamp),
	}
	if b.fromSource {
		// A keyed stream's copy is the input stream's message: its IDs,
		// dead letter and attempts are the original's.
		src, header, err := originOf(m.Header)
		if err != nil {
			return jetfn.Msg{}, err
		}
		msg.Subject, msg.Stream, msg.StreamSequence, msg.StreamIdentity = src.subject, src.stream, src.seq, src.identity
		msg.Header = jetfn.Header(header)
	}
	return msg, nil
}

// metaOf is the handler's view of a delivery that started: toMsg read it
// then, so it reads it again without error. Only an abandonment needs it
// later, so no worker keeps a copy of every message's.
func (b *binding) metaOf(d *delivery) jetfn.Msg {
	msg, _ := b.toMsgOf(d.msg, d.identity)
	return msg
}

// start moves a buffered delivery to running on worker wk, to be abandoned
// after deadline (never, if zero); false if the drain took it. It leaves
// lastBeat alone: the server's timer has run since the last InProgress,
// whatever the worker does, so the keeper must beat it on that clock.
//
// It takes no lock, as it runs for every message: the keeper reads d.worker
// and wk's deadline only for a delivery it sees running, and the
// compare-and-swap that makes d running follows their writes. Nothing reads
// them still for wk's previous delivery: that one was settled (under the
// lock), returned or abandoned, and wk starts nothing after an
// abandonment.
func (t *unsettledSet) start(d *delivery, deadline time.Time, wk *worker) bool {
	wk.deadline, d.worker = deadline, wk
	return d.move(stateBuffered, stateRunning)
}

// setAttempt sets a running delivery's attempt; false if the keeper abandoned
// it first. Counting may take a KV round trip (attempts.go), past the
// handler's deadline in an outage: the lock orders the write before the
// keeper's abandonment, or drops it, so the worker that settles an
// abandoned delivery never reads an attempt being written.
func (t *unsettledSet) setAttempt(d *delivery, a attempt) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if deliveryState(d.state.Load()) != stateRunning {
		return false
	}
	d.attempt = a
	return true
}

// countedAttempt is an abandoned delivery's attempt, or its delivery count
// if it was abandoned before setAttempt. Its keeper's abandonment, under
// the lock setAttempt takes, happened before this is read.
func (d *delivery) countedAttempt(msg jetfn.Msg) attempt {
	if d.attempt.n == 0 {
		return attempt{n: msg.NumDelivered}
	}
	return d.attempt
}

// passOver acks a backfill's delivery that is not one the backfill hands
// to the function, without running the handler.
func (b *binding) passOver(d *delivery) deliveryState {
	if !b.unsettled.finish(d) {
		return b.unfinished(d)
	}
	if err := reply(b.js.Conn(), d.msg, ackBody); err != nil {
		b.log.Warn("acking a message the backfill passes over", "err", err)
	}
	return stateSettled
}

// unfinished is the state of a running delivery that finish refused: the
// drain returned it, or the keeper abandoned it and a new worker settled
// it. Either way the worker must not settle it, nor forget it twice.
func (b *binding) unfinished(d *delivery) deliveryState {
	if deliveryState(d.state.Load()) == stateAbandoned {
		b.stats.abandonedRunning.Add(-1)
		return stateAbandoned
	}
	return stateReturned
}

// refuseUnsafe refuses what must never reach a handler: a payload larger than
// the function's maxPayload (refused before anything decodes it) and
// headers with control characters, which a log line or a downstream
// protocol could misread. Both make the message malformed. The server's
// Nats-Stream-Source is exempt: only the server sets it (it refuses a
// publish that carries one), and it separates a source's subject filters
// with form feeds.
func refuseUnsafe(msg jetfn.Msg, maxPayload int) error {
	if len(msg.Data) > maxPayload {
		return jetfn.Malformed(fmt.Errorf("payload of %d bytes exceeds maxPayload %d", len(msg.Data), maxPayload))
	}
	for key, values := range msg.Header {
		if key == streamSourceHeader {
			continue
		}
		if hasControl(key) {
			return jetfn.Malformed(fmt.Errorf("header name %q holds a control character", key))
		}
		for _, v := range values {
			if hasControlInValue(v) {
				return jetfn.Malformed(fmt.Errorf("header %s holds a control character", key))
			}
		}
	}
	return nil
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}

// hasControlInValue is hasControl for a header value, in which a
// horizontal tab is legal (RFC 9110 field-value) and harmless: the log
// handlers quote it.
func hasControlInValue(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r != '\t' && (r < 0x20 || r == 0x7f) }) >= 0
}

// call runs the handler in the delivery's runContext, which the keeper
// cancels at the manifest's timeout (and abandons a handler that ignores
// that) and which ends when the handler returns, and turns a panic into an
// error, so one bad message cannot take the process down.
func (b *binding) call(d *delivery, msg jetfn.Msg) (err error) {
	defer d.run.end()
	span := b.trace.startRun(&d.run, msg)
	defer func() { b.trace.endRun(span, msg, err) }() // after the recover below
	defer func() {
		if r := recover(); r != nil {
			b.msgLog(msg).Error("handler panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	if b.beforeRun != nil {
		if err := b.beforeRun(&d.run, d.msg, msg); err != nil {
			return err
		}
	}
	return b.handler.Handle(&d.run, msg)
}

// msgLog is the logger for lines about one message. It is built only when
// a line is written: on the success path nothing is logged.
func (b *binding) msgLog(msg jetfn.Msg) *slog.Logger {
	return b.log.With("stream_seq", msg.StreamSequence, "num_delivered", msg.NumDelivered).With(b.trace.runLogAttrs(msg)...)
}

// errExhausted is the reason of a dead letter whose every allowed delivery
// ended without a handler result.
func errExhausted(maxDeliver int) error {
	return fmt.Errorf("delivered %d times (maxDeliver) without a handler result: the process of the "+
		"last delivery stopped, or its handler outlived ackWait, or its dead-letter publish failed", maxDeliver)
}

// ---- Settled: the handler's result picks what JetStream is told.

// finish moves a running delivery to settled and forgets it, in one take
// of the lock (neither the keeper nor the drain has anything left to do
// with it); false if the drain returned it or the keeper abandoned it. It
// takes the lock that keep holds while it sends, so no InProgress can
// follow the message's ack or nak.
func (t *unsettledSet) finish(d *delivery) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !d.move(stateRunning, stateSettled) {
		return false
	}
	t.unlink(d)
	return true
}

// outcomeKind is what the runtime tells JetStream about one delivery.
type outcomeKind int

const (
	outcomeAck outcomeKind = iota
	outcomeRetry
	outcomeDeadLetter
)

// outcome is the decision for one delivery: the kind, and for a retry the
// delay before the redelivery.
type outcome struct {
	kind  outcomeKind
	delay time.Duration
}

// decide maps a handler's result to an outcome, as documented on Handler.
func decide(err error, numDelivered uint64, p *manifest.FunctionSpec) outcome {
	if err == nil {
		return outcome{kind: outcomeAck}
	}
	if errors.Is(err, jetfn.ErrMalformed) || errors.Is(err, jetfn.ErrPermanent) {
		return outcome{kind: outcomeDeadLetter}
	}
	if p.MaxDeliver > 0 && numDelivered >= uint64(p.MaxDeliver) {
		return outcome{kind: outcomeDeadLetter}
	}
	if delay, ok := jetfn.RetryDelay(err); ok {
		// Bounded: the duplicate-window horizon counts at most this.
		return outcome{kind: outcomeRetry, delay: min(delay, p.RetryAfterBound())}
	}
	return outcome{kind: outcomeRetry, delay: p.RetryDelay(numDelivered)}
}

// settle tells JetStream the outcome that decide picked, for the run's
// attempt number a (attempts.go), and reports
// whether that was an Ack that left: the caller counts those in its
// worker's slot.
func (b *binding) settle(m *nats.Msg, msg jetfn.Msg, herr error, a attempt) (acked bool) {
	out := decide(herr, a.n, &b.spec)
	switch out.kind {
	case outcomeAck:
		if err := reply(b.js.Conn(), m, ackBody); err != nil {
			b.msgLog(msg).Warn("acking", "err", err)
			return false
		}
		b.forgetAttempts(msg, a)
		b.settledHead()
		return true
	case outcomeRetry:
		b.stats.setLastError(herr)
		b.noteFailure(herr)
		log := b.msgLog(msg)
		log.Warn("handler failed; will retry", "err", herr, "delay", out.delay)
		b.nak(m, out.delay, log)
	case outcomeDeadLetter:
		b.stats.setLastError(herr)
		b.deadLetter(m, msg, herr, a)
	}
	return false
}

// forgetAttempts removes the run record of a message settled for good.
func (b *binding) forgetAttempts(msg jetfn.Msg, a attempt) {
	if a.recorded {
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		defer cancel()
		b.attempts.forget(ctx, b.spec.Name, msg)
	}
}

func (b *binding) nak(m *nats.Msg, delay time.Duration, log *slog.Logger) {
	if err := m.NakWithDelay(delay); err != nil {
		log.Warn("naking", "err", err)
		return
	}
	b.stats.retried.Add(1)
}

// settleTimeout bounds a dead-letter publish, so a NATS outage cannot hold a
// worker forever.
const settleTimeout = 10 * time.Second

// deadLetter stores the message on the dead-letter stream, then Terms it.
// If the store fails the message is kept: it is Nak'd with the backoff, and
// a later delivery tries again (past maxDeliver, without the handler), so a
// dead-letter outage delays the record but never loses the message.
func (b *binding) deadLetter(m *nats.Msg, msg jetfn.Msg, cause error, a attempt) {
	log := b.msgLog(msg)
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := publishDeadLetter(ctx, b.js, b.dlSubject, newDeadLetter(b.spec.Name, b.scope.get(), msg, cause)); err != nil {
		b.stats.deadLetterFailures.Add(1)
		b.stats.setLastError(fmt.Errorf("dead-lettering failed, message kept for redelivery: %w", err))
		log.Error("dead-lettering failed; message kept for redelivery", "err", err, "cause", cause)
		b.nak(m, b.spec.RetryDelay(a.n), log)
		return
	}
	b.stats.deadLettered.Add(1)
	log.Error("dead-lettered", "err", cause, "dead_letter_subject", b.dlSubject)
	if err := termWithReason(b.js.Conn(), m, headerValue(cause.Error())); err != nil {
		log.Warn("terminating a dead-lettered message", "err", err)
		return
	}
	b.stats.termed.Add(1)
	b.forgetAttempts(msg, a)
}

// termWithReason is TermWithReason, which nats.Msg lacks: the server
// puts the reason in its TERMINATED advisory.
func termWithReason(nc *nats.Conn, m *nats.Msg, reason string) error {
	return reply(nc, m, []byte("+TERM "+reason))
}

// The runtime publishes Ack, Nak and InProgress itself, on the connection
// that pulled the message: nats.Msg's methods allocate their options on
// every call (one allocation per message in issue 16's profile), and a
// delivery's state, not the message's acked flag, is what keeps it from
// being settled twice.
var (
	ackBody        = []byte("+ACK")
	nakBody        = []byte("-NAK")
	inProgressBody = []byte("+WPI")
)

// reply sends an acknowledgement body to the message's ack subject.
func reply(nc *nats.Conn, m *nats.Msg, body []byte) error {
	if m.Reply == "" {
		return nats.ErrMsgNoReply
	}
	return nc.Publish(m.Reply, body)
}

// ---- Returned: a drain gives back what it will not finish.

func (b *binding) returnUnstarted(m *nats.Msg) {
	if err := reply(b.js.Conn(), m, nakBody); err != nil {
		b.log.Warn("returning a message during drain", "err", err)
		return
	}
	b.stats.retried.Add(1)
}

// returnLater gives back a message that reached a binding whose run has
// ended but whose pull requests may still be open (stop waits up to a
// pull's wait for them): NakWithDelay(pullWait), by when every one of them
// has expired. A plain Nak let the server hand the message straight back
// to one of those requests, and the loop burnt every allowed delivery in
// milliseconds: a live deploy's re-bind dead-lettered healthy messages,
// never handled, as "delivered 5 times (maxDeliver) without a handler
// result" (deploy's TestLiveDeploy, 2 runs in 10).
func (b *binding) returnLater(m *nats.Msg) {
	if err := m.NakWithDelay(pullWait); err != nil {
		b.log.Warn("returning a message during drain", "err", err)
		return
	}
	b.stats.retried.Add(1)
}

// returnAll Naks, without delay, every delivery in state `from`, so another
// instance can take it at once. It returns how many it returned.
func (t *unsettledSet) returnAll(nc *nats.Conn, from deliveryState, log *slog.Logger) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for d := t.head; d != nil; d = d.next {
		if !d.move(from, stateReturned) {
			continue
		}
		if err := reply(nc, d.msg, nakBody); err != nil {
			log.Warn("returning a message", "err", err)
			continue
		}
		n++
	}
	return n
}

// drain waits for the workers up to timeout, then returns the messages
// still running to the stream and cancels their handlers.
func (b *binding) drain(w *workers, timeout time.Duration, cancelHandlers context.CancelFunc) {
	if w.wait(timeout) {
		return
	}
	n := b.unsettled.returnAll(b.js.Conn(), stateRunning, b.log)
	b.stats.retried.Add(uint64(n))
	b.log.Warn("drain timed out; returned in-flight messages for redelivery", "count", n)
	cancelHandlers()
	if !w.wait(pullWait) {
		b.log.Warn("handlers ignored cancellation; leaving them behind")
	}
}
