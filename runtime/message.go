package runtime

// This file is one message's life in a binding, in the order it happens:
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
	// prev and next link the unsettledSet.
	prev, next *delivery
}

func (d *delivery) move(from, to deliveryState) bool {
	return d.state.CompareAndSwap(int32(from), int32(to))
}

// ---- Credits: how many messages may be pulled and unsettled at once.

// credits count the messages this binding may hold: asked for and not yet
// arrived (outstanding), or delivered and not yet settled. The puller takes
// credits before it pulls and asks for exactly as many messages as it took,
// so the client never holds more messages than concurrency plus the
// prefetch allowance. A message of a request given up on (a leadership
// change, a pull that went quiet) can still arrive; it is taken all the
// same and its credit counted, so the hold goes over the limit only for
// such a straggler.
type credits struct {
	mu          sync.Mutex
	cond        *sync.Cond
	inUse       int
	outstanding int
	closed      bool
	// waiter is the waiting take's rule, nil while nobody waits: a release
	// wakes the puller only when the rule would let it pull, not once per
	// settled message.
	waiter *creditRule
	// drainWaiters count the awaitNoOutstanding calls waiting: the last
	// arrival of a request wakes them.
	drainWaiters int
}

// creditRule is what take waits for: enough free credits under limit.
type creditRule struct {
	limit  func() int
	enough func(free, limit, outstanding int) bool
}

// met reports whether the rule lets a take go ahead now. Called with mu held.
func (c *credits) met(r *creditRule) (n int, ok bool) {
	l := r.limit()
	n = l - c.inUse
	return n, n > 0 && r.enough(n, l, c.outstanding)
}

func newCredits() *credits {
	c := &credits{}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// take waits until enough credits are free, then takes every free one up
// to limit() for a pull request. It returns 0 once the credits are closed.
// limit is read again after every release, so a prefetch allowance that
// changes with the measured handling rate takes effect at once; enough lets
// the caller batch refills instead of pulling for every single freed
// credit.
func (c *credits) take(limit func() int, enough func(free, limit, outstanding int) bool) int {
	rule := &creditRule{limit: limit, enough: enough}
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.closed {
		if n, ok := c.met(rule); ok {
			c.inUse += n
			c.outstanding += n
			return n
		}
		c.waiter = rule
		c.cond.Wait()
		c.waiter = nil
	}
	return 0
}

// close ends the pulling: take returns 0 from now on.
func (c *credits) close() {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
}

// arrived moves one credit from outstanding to delivered.
func (c *credits) arrived() {
	c.mu.Lock()
	if c.outstanding > 0 {
		c.outstanding--
		if c.outstanding == 0 && c.drainWaiters > 0 {
			c.cond.Broadcast()
		}
	} else {
		c.inUse++ // a straggler of a request given up on
	}
	c.mu.Unlock()
}

// giveBack returns up to n outstanding credits: messages a request will
// not deliver.
func (c *credits) giveBack(n int) {
	c.mu.Lock()
	n = min(n, c.outstanding)
	c.outstanding -= n
	c.inUse -= n
	c.cond.Broadcast()
	c.mu.Unlock()
}

// release frees the credits of n settled or returned messages.
func (c *credits) release(n int) {
	if n < 0 {
		return
	}
	c.mu.Lock()
	c.inUse -= n
	if c.waiter != nil {
		if _, ok := c.met(c.waiter); ok {
			c.cond.Broadcast()
		}
	}
	c.mu.Unlock()
}

func (c *credits) outstandingCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outstanding
}

// awaitNoOutstanding waits until no request is outstanding, or timeout.
func (c *credits) awaitNoOutstanding(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	t := time.AfterFunc(timeout, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer t.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainWaiters++
	defer func() { c.drainWaiters-- }()
	for c.outstanding > 0 && time.Now().Before(deadline) {
		c.cond.Wait()
	}
}

// limitRaised wakes a take waiting for credits after its limit grew: a
// worker's place left empty is filled again (workers.reclaim).
func (c *credits) limitRaised() { c.release(0) }

// pullLimit is how many messages may be delivered and unsettled at once
// with live workers: none while every worker's place is left empty by an
// abandoned handler (workers.abandon).
func (b *binding) pullLimit(live int) int {
	if live <= 0 {
		return 0
	}
	return live + b.prefetch()
}

// DefaultMaxPrefetch caps the derived prefetch allowance; it is nats.go's
// own default buffer for Consume.
const DefaultMaxPrefetch = 500

// maxPrefetch is the most messages the buffer may hold beyond the workers.
func (b *binding) maxPrefetch() int {
	if b.spec.Prefetch != nil {
		return *b.spec.Prefetch
	}
	return DefaultMaxPrefetch
}

// prefetch is the current allowance for messages waiting for a worker. A
// manifest value is used as is. Otherwise it is derived from the measured
// handling rate so that the last buffered message is expected to wait about
// a quarter of ackWait, well under the half that the issue asks for, and the
// buffer keeper's heartbeats cover the rest. Before anything is measured the
// allowance equals concurrency.
func (b *binding) prefetch() int {
	if b.spec.Prefetch != nil {
		return *b.spec.Prefetch
	}
	avg := b.stats.recentAverage()
	if avg <= 0 {
		return b.spec.Concurrency
	}
	perSecond := float64(b.spec.Concurrency) / avg.Seconds()
	n := int(perSecond * (b.spec.AckWait / 4).Seconds())
	return min(max(n, 0), DefaultMaxPrefetch)
}

// recentAverage is an exponentially weighted average of processing times,
// cheap enough to read before every pull.
func (c *counters) recentAverage() time.Duration {
	return time.Duration(c.ewma.Load())
}

// ---- Pulled: a credit becomes a buffered delivery (pull.go asks).

// Pull requests and their replies are in pull.go: each arriving message
// becomes a buffered delivery.

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

// ---- Running: a worker takes it and calls the handler.

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

// process handles one delivery on worker wk, then settles it, and returns
// the state it left the delivery in; a settled one is already forgotten.
// The keeper heartbeats it while the handler runs, and abandons it if the
// handler outlives the timeout.
func (b *binding) process(ctx context.Context, d *delivery, wk *worker) deliveryState {
	m := d.msg
	msg, err := b.toMsg(m)
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
	a := b.attempts.next(ctx, b.spec.Name, msg, func(prior uint64) bool { return prior < uint64(b.spec.MaxDeliver) })
	if !b.unsettled.setAttempt(d, a) {
		return b.unfinished(d) // abandoned while its run was being counted
	}
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
// protocol could misread. Both make the message malformed.
func refuseUnsafe(msg jetfn.Msg, maxPayload int) error {
	if len(msg.Data) > maxPayload {
		return jetfn.Malformed(fmt.Errorf("payload of %d bytes exceeds maxPayload %d", len(msg.Data), maxPayload))
	}
	for key, values := range msg.Header {
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
	return b.handler.Handle(&d.run, msg)
}

// metaOf is the handler's view of a delivery that started: toMsg read it
// then, so it reads it again without error. Only an abandonment needs it
// later, so no worker keeps a copy of every message's.
func (b *binding) metaOf(d *delivery) jetfn.Msg {
	msg, _ := b.toMsg(d.msg)
	return msg
}

// toMsg is the handler's view of a delivery, read from its reply subject.
func (b *binding) toMsg(m *nats.Msg) (jetfn.Msg, error) {
	meta, ok := parseOwnAckReply(m.Reply, b.ackPrefix, b.spec.Stream)
	if !ok {
		return jetfn.Msg{}, fmt.Errorf("reply subject %q is not a JetStream ack subject", m.Reply)
	}
	return jetfn.Msg{
		Subject:        m.Subject,
		Data:           m.Data,
		Header:         jetfn.Header(m.Header),
		Stream:         meta.stream,
		StreamSequence: meta.streamSeq,
		StreamIdentity: b.consumer.streamIdentity(),
		NumDelivered:   meta.numDelivered,
		Published:      time.Unix(0, meta.timestamp),
	}, nil
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

// forgetAttempts removes the run record of a message settled for good.
func (b *binding) forgetAttempts(msg jetfn.Msg, a attempt) {
	if a.recorded {
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		defer cancel()
		b.attempts.forget(ctx, b.spec.Name, msg)
	}
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
		return true
	case outcomeRetry:
		b.stats.setLastError(herr)
		log := b.msgLog(msg)
		log.Warn("handler failed; will retry", "err", herr, "delay", out.delay)
		b.nak(m, out.delay, log)
	case outcomeDeadLetter:
		b.stats.setLastError(herr)
		b.deadLetter(m, msg, herr, a)
	}
	return false
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

// ---- Kept alive: InProgress for every held message, buffered or running.

// keepAlive runs the keeper until ctx is done. Every tick it sends
// InProgress for each held message, buffered or running, whose server
// timer was last reset `heartbeat` minus a tick ago: InProgress resets the
// server's ack-wait timer, so the timer never runs longer than heartbeat
// (at most ackWait/2) plus however late the tick is. It also abandons a
// running handler past the function's timeout. One ticker per function,
// not a timer per message, keeps short handlers free of cost.
func (b *binding) keepAlive(ctx context.Context, w *workers) {
	tick := b.keepTick()
	beat := inProgress(b.js.Conn())
	t := time.NewTimer(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.handoff.release() // the messages behind a waiting give must be seen
			res := b.unsettled.keep(b.currentHeartbeat()-tick, b.bufferBeats, w.reserve, beat)
			b.stats.heartbeats.Add(uint64(res.running))
			b.stats.bufferBeats.Add(uint64(res.buffered))
			for _, d := range res.overdue {
				w.abandon(d)
			}
			tick = b.keepTick()
			t.Reset(tick)
		}
	}
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
