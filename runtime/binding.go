package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
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
// It pulls with Fetch, asking for no more messages than it has free
// workers, so no message waits in a client buffer while its ack-wait clock
// runs (nats.go#1929): every delivered message is being handled.
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
	inflight  inflightSet
}

// run pulls and handles messages until ctx is done, then drains: in-flight
// handlers may finish (still heartbeating) for up to drainTimeout, and
// whatever still runs after that is Nak'd without delay so another instance
// takes it at once.
func (b *binding) run(ctx context.Context, drainTimeout time.Duration) {
	// Handlers outlive ctx: a shutdown must not cancel work in progress.
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	workers := newSlots(b.spec.Concurrency)
	var wg sync.WaitGroup
	for {
		free := workers.reserve(ctx)
		if free == 0 {
			break
		}
		b.fetch(ctx, handlerCtx, free, workers, &wg)
	}
	b.drain(&wg, drainTimeout, cancelHandlers)
}

// fetch asks for up to free messages and starts a handler for each one as it
// arrives. Messages that arrive after the drain began are returned at once.
func (b *binding) fetch(ctx, handlerCtx context.Context, free int, workers slots, wg *sync.WaitGroup) {
	batch, err := b.consumer.Fetch(free, jetstream.FetchMaxWait(fetchWait))
	if err != nil {
		workers.release(free)
		b.log.Warn("fetching messages", "err", err)
		pause(ctx, fetchWait)
		return
	}
	got := 0
	for m := range batch.Messages() {
		got++
		if ctx.Err() != nil {
			b.returnUnstarted(m)
			workers.release(1)
			continue
		}
		wg.Go(func() {
			defer workers.release(1)
			b.process(handlerCtx, m)
		})
	}
	workers.release(free - got)
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		b.log.Warn("pulling messages", "err", err)
		pause(ctx, fetchWait)
	}
}

func (b *binding) returnUnstarted(m jetstream.Msg) {
	if err := m.Nak(); err != nil {
		b.log.Warn("returning a message during drain", "err", err)
		return
	}
	b.stats.naked.Add(1)
}

// process handles one delivery: heartbeat while the handler runs, then settle.
func (b *binding) process(ctx context.Context, m jetstream.Msg) {
	msg, err := toMsg(m)
	if err != nil {
		b.log.Error("reading message metadata", "err", err)
		return
	}
	log := b.log.With("stream_seq", msg.StreamSequence, "num_delivered", msg.NumDelivered)
	d := b.inflight.add(m)
	defer b.inflight.remove(d)
	b.stats.inFlight.Add(1)
	defer b.stats.inFlight.Add(-1)
	if msg.NumDelivered > 1 {
		b.stats.redeliveries.Add(1)
	}
	start := time.Now()
	hb := startHeartbeat(b.spec.Heartbeat, func() {
		if m.InProgress() == nil {
			b.stats.heartbeats.Add(1)
		}
	})
	herr := b.call(ctx, msg, log)
	hb.stop()
	b.stats.observe(time.Since(start))
	b.stats.handled.Add(1)
	if !d.claim() {
		return // the drain already returned this message
	}
	b.settle(m, msg, herr, log)
}

// call runs the handler with the manifest's timeout and turns a panic into
// an error, so one bad message cannot take the process down.
func (b *binding) call(ctx context.Context, msg Msg, log *slog.Logger) (err error) {
	if b.spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.spec.Timeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			log.Error("handler panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return b.handler.Handle(ctx, msg)
}

// settle tells JetStream the outcome that decide picked.
func (b *binding) settle(m jetstream.Msg, msg Msg, herr error, log *slog.Logger) {
	out := decide(herr, msg.NumDelivered, b.policy)
	switch out.kind {
	case outcomeAck:
		if err := m.Ack(); err != nil {
			log.Warn("acking", "err", err)
			return
		}
		b.stats.acked.Add(1)
	case outcomeRetry:
		b.stats.setLastError(herr)
		log.Warn("handler failed; will retry", "err", herr, "delay", out.delay)
		b.nak(m, out.delay, log)
	case outcomeDeadLetter:
		b.stats.setLastError(herr)
		b.deadLetter(m, msg, herr, log)
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
func (b *binding) deadLetter(m jetstream.Msg, msg Msg, cause error, log *slog.Logger) {
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

// drain waits for in-flight handlers up to timeout, then returns the
// messages still running to the stream and cancels their handlers.
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
	n := b.inflight.returnAll(b.log)
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
