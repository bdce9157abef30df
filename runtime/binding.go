package runtime

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// binding is one function bound to its durable consumer in this process.
//
// One puller (pull.go) requests messages and hands them to `concurrency`
// workers, or to a buffer while every worker is busy (delivery.go). The
// puller asks for no more than concurrency plus the prefetch allowance, and
// a keeper sends InProgress for buffered messages as for running ones, so a
// message never waits in the buffer long enough to be redelivered
// (nats.go#1929).
type binding struct {
	// lastPending is the consumer's pending figures when its info last
	// answered (status).
	lastPending atomic.Pointer[consumerPending]
	spec        manifest.FunctionSpec
	handler     jetfn.Handler
	js          jetstream.JetStream
	consumer    *consumerHandle
	dlSubject   string
	// ackPrefix starts the ack subject of every delivery (ackPrefix()).
	ackPrefix string
	stats     *counters
	log       *slog.Logger
	unsettled unsettledSet
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
	// attempts counts the handler runs of redelivered messages.
	attempts *attemptStore
	// rate paces the pulls (manifest rateLimit); nil without one.
	rate *rateLimiter
	// keyRate paces each key of a keyed function (manifest keyRateLimit,
	// keyrate.go); nil without one. Its partitions share it.
	keyRate *keyRateLimiter
	// lease lets one instance at a time pull (manifest singleton); nil
	// without it. A backfill binding shares its function's.
	lease *lease
	// scope is the name its output and dead-letter IDs are scoped by
	// (scope.go), shared with its Publisher.
	scope *idScope
	// deployed is the manifest and revision the runtime runs now.
	deployed *deployed
	// remote is a remote function's view of its endpoint's responders
	// (remotewatch.go); nil for a compiled-in function.
	remote *remoteState
	// trace starts each run's span; nil when tracing is off (tracing.go).
	trace *runTracer
	// bf is the binding of the main consumer's backfill consumer while one
	// runs (backfill.go); nil otherwise.
	bf *binding
	// backfill, on a backfill binding, is the range it hands to the
	// handler, and main the binding it catches up for.
	backfill *backfillRange
	main     *binding
	// parts are a keyed function's partition bindings (keyed.go): the
	// function's own binding reads no consumer of its own and runs them;
	// gate, shared by them, holds its handler runs to concurrency.
	parts []*binding
	gate  chan struct{}
	// router copies a keyed function's messages into its keyed stream
	// when its key is in a header or a field (router.go); nil otherwise.
	router *router
	// debouncer, on a debounced function, turns its input into schedules
	// of its keys (debounce.go); nil otherwise.
	debouncer *debouncer
	// keepInput, on a keyed function keyed by a subject token, recreates
	// its input stream if an operator deleted it (keyed.go); nil otherwise.
	keepInput func(context.Context)
	// beforeRun, when set, runs before the handler of every delivery (m)
	// and fails the run with its error: a debounced function's check that
	// its key's newest input has a schedule (debounce.go).
	beforeRun func(ctx context.Context, m *nats.Msg, msg jetfn.Msg) error
	// fromSource is set on a partition binding: its messages are copies of
	// the input stream's, whose identity they keep (sourcedMsg).
	fromSource bool
	// head is a partition's message in hand, for status (keyed.go).
	head atomic.Pointer[keyHead]
	// runs remembers the last runs for the console (runs.go).
	runs *runRing
	// closeOnce closes the handler once (closeHandler).
	closeOnce sync.Once
}

// run pulls and handles messages until ctx is done, then drains: buffered
// messages go back at once, in-flight handlers may finish (still
// heartbeating) for up to drainTimeout, and whatever still runs after that
// is Nak'd without delay so another instance takes it at once.
func (b *binding) run(ctx context.Context, drainTimeout time.Duration) {
	if b.parts != nil {
		b.runParts(ctx, drainTimeout)
		return
	}
	// Handlers outlive ctx: a shutdown must not cancel work in progress.
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	if b.lease != nil && b.main == nil {
		// Used until the drain (and the backfill's) is over: until then
		// this instance still handles what it pulled.
		defer b.lease.use()()
	}
	w := &workers{b: b, stopping: ctx, handlerCtx: handlerCtx, credits: newCredits(),
		handoff: newHandoff(b.spec.Concurrency+b.maxPrefetch(), b.spec.Concurrency).prioritize(b.spec.PriorityHeader)}
	for slot := range b.spec.Concurrency {
		w.start(slot)
	}
	// The keeper and the consumer watch outlive ctx: running handlers need
	// heartbeats (and a consumer) while the drain waits for them.
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	var keepers sync.WaitGroup
	keepers.Go(func() { b.keepAlive(keepCtx, w) })
	keepers.Go(func() { b.consumer.watch(keepCtx) })
	if b.bf != nil {
		keepers.Go(func() { b.bf.runBackfill(ctx, drainTimeout) })
	}
	defer func() {
		stopKeeping()
		keepers.Wait()
	}()
	p, err := newPuller(ctx, b, w)
	if err != nil {
		b.log.Error("subscribing for pulls; nothing is handled", "err", err)
	} else {
		keepers.Go(func() { p.watch(keepCtx) })
		b.pull(ctx, p, w)
		p.stop()
	}
	if n := b.unsettled.returnAll(b.js.Conn(), stateBuffered, b.log); n > 0 {
		b.stats.retried.Add(uint64(n))
		b.log.Info("returned buffered messages for redelivery", "count", n)
	}
	w.handoff.close()
	b.drain(w, drainTimeout, cancelHandlers)
	// The floor the drain's acks left, for a consumer lost before this
	// function runs again (positions.go).
	b.consumer.recordNow(context.WithoutCancel(ctx))
}

// pull asks for messages whenever enough credits are free, until ctx is
// done. Refill when half the allowance is free, or at once when no message
// waits for a worker and no request is open: pulling for every freed credit
// would cost a request per message, and an open request already takes
// whatever the stream gets next.
func (b *binding) pull(ctx context.Context, p *puller, w *workers) {
	stop := context.AfterFunc(ctx, w.credits.close)
	defer stop()
	limit := func() int { return b.pullLimit(w.live()) }
	enough := func(free, limit, outstanding int) bool {
		return 2*free >= limit || w.handoff.buffered() == 0 && outstanding == 0
	}
	if b.rate != nil {
		// One request of one message at a time, and none while a message
		// waits for its turn (receive): the next would queue unseen behind
		// it, where no InProgress reaches it.
		enough = func(_, _, outstanding int) bool { return outstanding == 0 && b.rate.held.Load() == 0 }
		w.credits.wakeOnArrival = true
	}
	for {
		if b.lease != nil {
			b.lease.await(ctx) // a standby pulls nothing
		}
		free := w.credits.take(limit, enough)
		if free == 0 {
			return
		}
		if b.lease != nil && !b.lease.holds() {
			w.credits.giveBack(free) // lost while waiting for credits
			continue
		}
		if b.rate != nil && free > 1 {
			w.credits.giveBack(free - 1)
			free = 1
		}
		p.ask(ctx, free)
	}
}

func (b *binding) currentHeartbeat() time.Duration { return time.Duration(b.heartbeat.Load()) }

// tightenHeartbeat lowers the heartbeat to at most hb, never raises it.
func (b *binding) tightenHeartbeat(hb time.Duration) {
	for _, p := range b.parts {
		p.tightenHeartbeat(hb)
	}
	for {
		cur := b.heartbeat.Load()
		if int64(hb) >= cur || b.heartbeat.CompareAndSwap(cur, int64(hb)) {
			return
		}
	}
}

// followServerAckWait tightens the heartbeat to a third of the consumer's
// ackWait on the server when that is below the manifest's: another
// instance, or an administrator, lowered it, and a long handler of this
// one must still be kept alive.
func (b *binding) followServerAckWait(w time.Duration) {
	if w > 0 && w < b.spec.AckWait {
		b.tightenHeartbeat(w / 3)
	}
}

// everyOrKicked calls do every interval, and at once whenever kick
// receives, until ctx is done.
func everyOrKicked(ctx context.Context, every time.Duration, kick <-chan struct{}, do func(context.Context)) {
	repeat(ctx, func() time.Duration { return every }, kick, do)
}

// repeat calls do, until ctx is done, each time interval() after the last
// call ended (interval is asked again every time), or at once when kick
// receives.
func repeat(ctx context.Context, interval func() time.Duration, kick <-chan struct{}, do func(context.Context)) {
	t := time.NewTimer(interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		do(ctx)
		t.Reset(interval())
	}
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
