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
// allowance, and a keeper sends InProgress for buffered messages, so a
// message never waits in the buffer long enough to be redelivered
// (nats.go#1929): the ack-wait clock of a buffered message is reset like
// that of a running one.
type binding struct {
	spec      FunctionSpec
	handler   Handler
	js        jetstream.JetStream
	stream    jetstream.Stream
	consumer  jetstream.Consumer
	dlSubject string
	policy    retryPolicy
	stats     *counters
	log       *slog.Logger
	tracked   tracker
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
	held := newCredits()
	buffer := make(chan *delivery, b.spec.Concurrency+b.maxPrefetch())
	var workers, keeper sync.WaitGroup
	for range b.spec.Concurrency {
		workers.Go(func() { b.work(ctx, handlerCtx, buffer, held) })
	}
	// The keeper outlives ctx: running handlers need heartbeats while the
	// drain waits for them.
	keeperCtx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	keeper.Go(func() { b.keepAlive(keeperCtx) })
	defer func() {
		stopKeeper()
		keeper.Wait()
	}()
	// Refill when half the allowance is free, or at once when no message
	// waits for a worker: each pull is a request and a subscription, so
	// pulling for every freed credit would cost more than the messages.
	enough := func(free, limit int) bool { return 2*free >= limit || len(buffer) == 0 }
	for {
		free := held.take(ctx, b.pullLimit, enough)
		if free == 0 {
			break
		}
		b.fetch(ctx, free, buffer, held)
	}
	if n := b.tracked.returnAll(stateBuffered, b.log); n > 0 {
		b.stats.naked.Add(uint64(n))
		b.log.Info("returned buffered messages for redelivery", "count", n)
	}
	close(buffer)
	b.drain(&workers, drainTimeout, cancelHandlers)
}

// pullLimit is how many messages may be delivered and unsettled at once.
func (b *binding) pullLimit() int { return b.spec.Concurrency + b.prefetch() }

// fetch asks for up to free messages and buffers each one as it arrives.
// Messages that arrive after the drain began are returned at once.
func (b *binding) fetch(ctx context.Context, free int, buffer chan<- *delivery, held *credits) {
	batch, err := b.consumer.Fetch(free, jetstream.FetchMaxWait(fetchWait))
	if err != nil {
		held.release(free)
		b.log.Warn("fetching messages", "err", err)
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
		// The consumer leader moved (a cluster node stopped): the next pull
		// reaches the new leader, so waiting would only stall the function.
		if !errors.Is(err, jetstream.ErrServerShutdown) && !errors.Is(err, jetstream.ErrConsumerLeadershipChanged) {
			pause(ctx, fetchWait)
		}
	}
}

// work handles buffered messages until the buffer is closed. Once stopping
// is done it starts nothing more: it returns what it takes from the buffer,
// as the drain does, so a shutdown never begins new work.
func (b *binding) work(stopping, handlerCtx context.Context, buffer <-chan *delivery, held *credits) {
	for d := range buffer {
		switch {
		case stopping.Err() != nil:
			if d.move(stateBuffered, stateReturned) {
				b.returnUnstarted(d.msg)
			}
		case b.tracked.start(d):
			b.process(handlerCtx, d)
		}
		b.tracked.remove(d)
		held.release(1)
	}
}

// keepAlive sends the heartbeats until ctx is done: InProgress for a running
// message every `heartbeat`, and for a buffered one every third of ackWait.
// InProgress resets the server's ack-wait timer, so neither a long handler
// nor a wait in the buffer gets a message redelivered. One ticker per
// function, not a timer per message, keeps short handlers free of cost.
func (b *binding) keepAlive(ctx context.Context) {
	bufferedEvery := b.spec.AckWait / 3
	if !b.bufferBeats {
		bufferedEvery = 0
	}
	t := time.NewTicker(min(b.spec.AckWait/3, b.spec.Heartbeat) / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			running, buffered := b.tracked.beat(b.spec.Heartbeat, bufferedEvery)
			b.stats.heartbeats.Add(uint64(running))
			b.stats.bufferBeats.Add(uint64(buffered))
		}
	}
}

func (b *binding) returnUnstarted(m jetstream.Msg) {
	if err := m.Nak(); err != nil {
		b.log.Warn("returning a message during drain", "err", err)
		return
	}
	b.stats.naked.Add(1)
}

// process handles one delivery, then settles it. The keeper heartbeats it
// while the handler runs.
func (b *binding) process(ctx context.Context, d *delivery) {
	m := d.msg
	msg, err := toMsg(m)
	if err != nil {
		b.log.Error("reading message metadata", "err", err)
		return
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
		return // the drain already returned this message
	}
	b.settle(m, msg, herr)
}

// msgLog is the logger for lines about one message. It is built only when
// a line is written: on the success path nothing is logged.
func (b *binding) msgLog(msg Msg) *slog.Logger {
	return b.log.With("stream_seq", msg.StreamSequence, "num_delivered", msg.NumDelivered)
}

// call runs the handler with the manifest's timeout and turns a panic into
// an error, so one bad message cannot take the process down.
func (b *binding) call(ctx context.Context, msg Msg) (err error) {
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
func (b *binding) settle(m jetstream.Msg, msg Msg, herr error) {
	out := decide(herr, msg.NumDelivered, b.policy)
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
// If the store fails the message is kept: it is Nak'd, and on its last
// delivery the max-deliveries advisory dead-letters it later.
func (b *binding) deadLetter(m jetstream.Msg, msg Msg, cause error) {
	log := b.msgLog(msg)
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	dl := deadLetter{
		function: b.spec.Name, stream: msg.Stream, subject: msg.Subject,
		sequence: msg.StreamSequence, numDelivered: msg.NumDelivered,
		data: msg.Data, header: msg.Header, reason: cause.Error(),
	}
	if err := publishDeadLetter(ctx, b.js, b.dlSubject, dl); err != nil {
		log.Error("dead-lettering failed; message kept for redelivery", "err", err, "cause", cause)
		b.nak(m, b.policy.delayAfter(msg.NumDelivered), log)
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
func (b *binding) drain(wg *sync.WaitGroup, timeout time.Duration, cancelHandlers context.CancelFunc) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(timeout):
	}
	n := b.tracked.returnAll(stateRunning, b.log)
	b.stats.naked.Add(uint64(n))
	b.log.Warn("drain timed out; returned in-flight messages for redelivery", "count", n)
	cancelHandlers()
	select {
	case <-done:
	case <-time.After(fetchWait):
		b.log.Warn("handlers ignored cancellation; leaving them behind")
	}
}

func toMsg(m jetstream.Msg) (Msg, error) {
	meta, err := m.Metadata()
	if err != nil {
		return Msg{}, err
	}
	return Msg{
		Subject:        m.Subject(),
		Data:           m.Data(),
		Header:         m.Headers(),
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
