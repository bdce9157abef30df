package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fetchWait is how long one pull request stays open on the server. It bounds
// how long a drain waits for the last pull to end, and it is short enough
// that a refill never waits on a stalled request.
const fetchWait = time.Second

// settleTimeout bounds a dead-letter publish, so a NATS outage cannot hold a
// worker forever.
const settleTimeout = 10 * time.Second

// binding is one function bound to its durable consumer in this process.
//
// One puller fetches messages into a buffer and `concurrency` workers handle
// them. The puller asks for no more than concurrency plus the prefetch
// allowance, and a keeper sends InProgress for buffered messages as for
// running ones, so a message never waits in the buffer long enough to be
// redelivered (nats.go#1929).
type binding struct {
	spec      manifest.FunctionSpec
	handler   jetfn.Handler
	js        jetstream.JetStream
	consumer  *consumerHandle
	dlSubject string
	stats     *counters
	log       *slog.Logger
	tracked   tracker
	// heartbeat is spec.Heartbeat, or shorter: an Apply that lowers the
	// function's ackWait tightens it before the consumer changes, so the
	// messages this binding still holds are kept alive under the new wait.
	heartbeat atomic.Int64
	// bufferBeats is off only in tests that show what it prevents.
	bufferBeats bool
	// observe, when set, receives every handler run's duration.
	observe func(function string, d time.Duration)
	// refusal is the runtime's note of the last manifest it refused.
	refusal *atomic.Pointer[string]
}

// run pulls and handles messages until ctx is done, then drains: buffered
// messages go back at once, in-flight handlers may finish (still
// heartbeating) for up to drainTimeout, and whatever still runs after that
// is Nak'd without delay so another instance takes it at once.
func (b *binding) run(ctx context.Context, drainTimeout time.Duration) {
	// Handlers outlive ctx: a shutdown must not cancel work in progress.
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	w := &workers{b: b, stopping: ctx, handlerCtx: handlerCtx, held: newCredits(),
		buffer: make(chan *delivery, b.spec.Concurrency+b.maxPrefetch())}
	for range b.spec.Concurrency {
		w.start()
	}
	// The keeper and the consumer watch outlive ctx: running handlers need
	// heartbeats (and a consumer) while the drain waits for them.
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	var keepers sync.WaitGroup
	keepers.Go(func() { b.keepAlive(keepCtx, w) })
	keepers.Go(func() { b.consumer.watch(keepCtx) })
	defer func() {
		stopKeeping()
		keepers.Wait()
	}()
	// Refill when half the allowance is free, or at once when no message
	// waits for a worker: each pull is a request and a subscription, so
	// pulling for every freed credit would cost more than the messages.
	enough := func(free, limit int) bool { return 2*free >= limit || len(w.buffer) == 0 }
	for {
		free := w.held.take(ctx, b.pullLimit, enough)
		if free == 0 {
			break
		}
		b.fetch(ctx, free, w.buffer, w.held)
	}
	if n := b.tracked.returnAll(stateBuffered, b.log); n > 0 {
		b.stats.naked.Add(uint64(n))
		b.log.Info("returned buffered messages for redelivery", "count", n)
	}
	close(w.buffer)
	b.drain(w, drainTimeout, cancelHandlers)
}

// pullLimit is how many messages may be delivered and unsettled at once.
func (b *binding) pullLimit() int { return b.spec.Concurrency + b.prefetch() }

// fetch asks for up to free messages and buffers each one as it arrives.
// Messages that arrive after the drain began are returned at once. A pull
// that fails asks the consumer watch to look: the consumer may be gone.
func (b *binding) fetch(ctx context.Context, free int, buffer chan<- *delivery, held *credits) {
	batch, err := b.consumer.get().Fetch(free, jetstream.FetchMaxWait(fetchWait))
	if err != nil {
		held.release(free)
		b.log.Warn("fetching messages", "err", err)
		b.consumer.check()
		pause(ctx, fetchWait)
		return
	}
	got := 0
	for m := range batch.Messages() {
		got++
		if ctx.Err() != nil {
			b.returnUnstarted(m)
			held.release(1)
			continue
		}
		buffer <- b.tracked.add(m)
	}
	held.release(free - got)
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		b.log.Warn("pulling messages", "err", err)
		b.consumer.check()
		// The consumer leader moved (a cluster node stopped): the next pull
		// reaches the new leader, so waiting would only stall the function.
		if !errors.Is(err, jetstream.ErrServerShutdown) && !errors.Is(err, jetstream.ErrConsumerLeadershipChanged) {
			pause(ctx, fetchWait)
		}
	}
}

// keepAlive runs the keeper until ctx is done. Every tick it sends
// InProgress for each held message, buffered or running, whose server
// timer was last reset `heartbeat` minus a tick ago: InProgress resets the
// server's ack-wait timer, so the timer never runs longer than heartbeat
// (at most ackWait/2) plus however late the tick is. It also abandons a
// running handler past the function's timeout. One ticker per function,
// not a timer per message, keeps short handlers free of cost.
func (b *binding) keepAlive(ctx context.Context, w *workers) {
	tick := b.keepTick()
	t := time.NewTimer(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			res := b.tracked.keep(b.currentHeartbeat()-tick, b.bufferBeats, w.reserve)
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

func (b *binding) currentHeartbeat() time.Duration { return time.Duration(b.heartbeat.Load()) }

// tightenHeartbeat lowers the heartbeat to at most hb, never raises it.
func (b *binding) tightenHeartbeat(hb time.Duration) {
	for {
		cur := b.heartbeat.Load()
		if int64(hb) >= cur || b.heartbeat.CompareAndSwap(cur, int64(hb)) {
			return
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

func (b *binding) returnUnstarted(m jetstream.Msg) {
	if err := m.Nak(); err != nil {
		b.log.Warn("returning a message during drain", "err", err)
		return
	}
	b.stats.naked.Add(1)
}

// process handles one delivery on worker s, then settles it, and returns
// the state it left the delivery in. The keeper heartbeats it while the
// handler runs, and abandons it if the handler outlives the timeout.
func (b *binding) process(ctx context.Context, d *delivery, s *slot) deliveryState {
	m := d.msg
	msg, err := toMsg(m)
	if err != nil {
		b.log.Error("reading message metadata", "err", err)
		return stateSettled
	}
	// A tick past the timeout: a handler that returns when its context is
	// cancelled is never abandoned.
	var deadline time.Time
	if b.spec.Timeout > 0 {
		deadline = time.Now().Add(b.spec.Timeout + b.keepTick())
	}
	if !b.tracked.start(d, msg, deadline, s) {
		return stateReturned // the drain took it
	}
	if msg.NumDelivered > uint64(b.spec.MaxDeliver) {
		// Every allowed delivery ended without a result: the consumer has
		// one delivery more than maxDeliver for exactly this.
		if b.tracked.finish(d) {
			b.deadLetter(m, msg, errExhausted(b.spec.MaxDeliver))
		}
		return stateSettled
	}
	b.stats.inFlight.Add(1)
	defer b.stats.inFlight.Add(-1)
	if msg.NumDelivered > 1 {
		b.stats.redeliveries.Add(1)
	}
	start := time.Now()
	herr := checkEdge(msg, b.spec.MaxPayload)
	if herr == nil {
		herr = b.call(ctx, msg)
	}
	took := time.Since(start)
	b.stats.observe(took)
	if b.observe != nil {
		b.observe(b.spec.Name, took)
	}
	b.stats.handled.Add(1)
	if !b.tracked.finish(d) {
		// The drain returned it, or the keeper abandoned it and a new
		// worker settled it; this late result is dropped.
		if deliveryState(d.state.Load()) == stateAbandoned {
			b.stats.abandonedRunning.Add(-1)
			return stateAbandoned
		}
		return stateReturned
	}
	b.settle(m, msg, herr)
	return stateSettled
}

// errExhausted is the reason of a dead letter whose every allowed delivery
// ended without a handler result.
func errExhausted(maxDeliver int) error {
	return fmt.Errorf("delivered %d times (maxDeliver) without a handler result: the process of the "+
		"last delivery stopped, or its handler outlived ackWait, or its dead-letter publish failed", maxDeliver)
}

// msgLog is the logger for lines about one message. It is built only when
// a line is written: on the success path nothing is logged.
func (b *binding) msgLog(msg jetfn.Msg) *slog.Logger {
	return b.log.With("stream_seq", msg.StreamSequence, "num_delivered", msg.NumDelivered)
}

// call runs the handler with the manifest's timeout (its context is
// cancelled then; the keeper abandons a handler that ignores that) and
// turns a panic into an error, so one bad message cannot take the process
// down.
func (b *binding) call(ctx context.Context, msg jetfn.Msg) (err error) {
	ctx = withNumDelivered(ctx, msg.NumDelivered)
	if b.spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.spec.Timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			b.msgLog(msg).Error("handler panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return b.handler.Handle(ctx, msg)
}

// settle tells JetStream the outcome that decide picked.
func (b *binding) settle(m jetstream.Msg, msg jetfn.Msg, herr error) {
	out := decide(herr, msg.NumDelivered, &b.spec)
	switch out.kind {
	case outcomeAck:
		if err := m.Ack(); err != nil {
			b.msgLog(msg).Warn("acking", "err", err)
			return
		}
		b.stats.acked.Add(1)
	case outcomeRetry:
		b.stats.setLastError(herr)
		log := b.msgLog(msg)
		log.Warn("handler failed; will retry", "err", herr, "delay", out.delay)
		b.nak(m, out.delay, log)
	case outcomeDeadLetter:
		b.stats.setLastError(herr)
		b.deadLetter(m, msg, herr)
	}
}

func (b *binding) nak(m jetstream.Msg, delay time.Duration, log *slog.Logger) {
	if err := m.NakWithDelay(delay); err != nil {
		log.Warn("naking", "err", err)
		return
	}
	b.stats.naked.Add(1)
}

// deadLetter stores the message on the dead-letter stream, then Terms it.
// If the store fails the message is kept: it is Nak'd with the backoff, and
// a later delivery tries again (past maxDeliver, without the handler), so a
// dead-letter outage delays the record but never loses the message.
func (b *binding) deadLetter(m jetstream.Msg, msg jetfn.Msg, cause error) {
	log := b.msgLog(msg)
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	dl := deadLetter{
		function: b.spec.Name, stream: msg.Stream, subject: msg.Subject,
		sequence: msg.StreamSequence, numDelivered: msg.NumDelivered,
		data: msg.Data, header: nats.Header(msg.Header), reason: cause.Error(),
	}
	if err := publishDeadLetter(ctx, b.js, b.dlSubject, dl); err != nil {
		log.Error("dead-lettering failed; message kept for redelivery", "err", err, "cause", cause)
		b.nak(m, b.spec.RetryDelay(msg.NumDelivered), log)
		return
	}
	b.stats.deadLettered.Add(1)
	log.Error("dead-lettered", "err", cause, "dead_letter_subject", b.dlSubject)
	if err := m.TermWithReason(headerValue(cause.Error())); err != nil {
		log.Warn("terminating a dead-lettered message", "err", err)
		return
	}
	b.stats.termed.Add(1)
}

// drain waits for the workers up to timeout, then returns the messages
// still running to the stream and cancels their handlers.
func (b *binding) drain(w *workers, timeout time.Duration, cancelHandlers context.CancelFunc) {
	if w.wait(timeout) {
		return
	}
	n := b.tracked.returnAll(stateRunning, b.log)
	b.stats.naked.Add(uint64(n))
	b.log.Warn("drain timed out; returned in-flight messages for redelivery", "count", n)
	cancelHandlers()
	if !w.wait(fetchWait) {
		b.log.Warn("handlers ignored cancellation; leaving them behind")
	}
}

func toMsg(m jetstream.Msg) (jetfn.Msg, error) {
	meta, err := m.Metadata()
	if err != nil {
		return jetfn.Msg{}, err
	}
	return jetfn.Msg{
		Subject:        m.Subject(),
		Data:           m.Data(),
		Header:         jetfn.Header(m.Headers()),
		Stream:         meta.Stream,
		StreamSequence: meta.Sequence.Stream,
		NumDelivered:   meta.NumDelivered,
		Published:      meta.Timestamp,
	}, nil
}

// pause waits d or until ctx is done, to slow a retry loop after an error.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
