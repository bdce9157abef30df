package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
)

// work is a baseline's per-message handler; nil means Ack, an error Nak.
type work func(ctx context.Context, m jetstream.Msg) error

func noopWork(context.Context, jetstream.Msg) error { return nil }

// sleepWork is the slow workload's handler.
func sleepWork(d time.Duration) work {
	return func(ctx context.Context, _ jetstream.Msg) error { return sleep(ctx, d) }
}

// sleep waits d, or returns ctx's error if ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// budgetOpts give raw Consume the same in-flight budget as jetfn with
// prefetch P: PullMaxMessages(concurrency+P). With a small
// PullMaxMessages, nats.go v1.55.0's Consume sometimes waits for its pull
// heartbeat to expire (2 × 15 s by default) before it pulls again, so the
// expiry and heartbeat are cut to jetfn's own pull wait (1 s) and the
// shortest heartbeat nats.go accepts (500 ms); otherwise raw would be
// slowed by a stall, not by its design.
func budgetOpts(spec childSpec) []jetstream.PullConsumeOpt {
	return []jetstream.PullConsumeOpt{
		jetstream.PullMaxMessages(spec.Concurrency + spec.Prefetch),
		jetstream.PullExpiry(time.Second),
		jetstream.PullHeartbeat(500 * time.Millisecond),
	}
}

// startRaw is the baseline: what a careful engineer writes by hand with
// nats.go. It creates the same stream and consumer as the runtime's, and
// consumes with Consume's defaults (or opts), handing each message to one of
// concurrency workers over an unbuffered channel (so Consume's callback
// blocks while all workers are busy). Each worker runs w and acks.
func startRaw(ctx context.Context, nc *nats.Conn, wl workload, concurrency int, w work, opts ...jetstream.PullConsumeOpt) (func() error, error) {
	cons, err := createConsumer(ctx, nc, wl)
	if err != nil {
		return nil, err
	}
	msgs := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() { rawWorker(ctx, msgs, w) })
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-ctx.Done():
		}
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("consuming: %w", err)
	}
	return func() error {
		<-ctx.Done()
		cc.Stop()
		wg.Wait()
		return nil
	}, nil
}

func rawWorker(ctx context.Context, msgs <-chan jetstream.Msg, w work) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-msgs:
			if err := w(ctx, m); err != nil {
				_ = m.Nak()
				continue
			}
			_ = m.Ack()
		}
	}
}

// createConsumer creates the workload's streams and its durable consumer.
func createConsumer(ctx context.Context, nc *nats.Conn, wl workload) (jetstream.Consumer, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	for name, subjects := range wl.streams {
		if _, err := js.CreateOrUpdateStream(ctx, streamConfig(name, subjects)); err != nil {
			return nil, fmt.Errorf("creating stream %s: %w", name, err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, wl.stream, consumerConfig(wl))
	if err != nil {
		return nil, fmt.Errorf("creating consumer: %w", err)
	}
	return cons, nil
}

// startNoopRuntime runs the runtime with a function that does nothing (or
// sleeps, for the slow workload), as deployed: heartbeat and counters on,
// logging at info (to io.Discard, so the cost measured is building records,
// not a terminal). prefetch nil leaves the runtime's derived default.
func startNoopRuntime(ctx context.Context, nc *nats.Conn, spec childSpec, prefetch *int, opts ...runtime.Option) (func() error, error) {
	wl := spec.workload()
	m, err := noopManifest(wl, spec.Concurrency, prefetch)
	if err != nil {
		return nil, err
	}
	handle := func(context.Context, jetfn.Msg) error { return nil }
	if spec.Sleep > 0 {
		handle = func(ctx context.Context, _ jetfn.Msg) error { return sleep(ctx, spec.Sleep) }
	}
	noop := func(jetfn.Deps) (jetfn.Handler, error) { return jetfn.HandlerFunc(handle), nil }
	fns := []jetfn.Function{{Name: wl.durable, New: noop}}
	return startRuntime(ctx, nc, m, fns, opts...)
}

// startRuntime runs a runtime until ctx is done and returns once it is ready.
func startRuntime(ctx context.Context, nc *nats.Conn, m *manifest.Manifest, fns []jetfn.Function, opts ...runtime.Option) (func() error, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts = append(opts, runtime.WithLogger(log), runtime.WithDrainTimeout(5*time.Second))
	rt, err := runtime.New(nc, m, fns, opts...)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	select {
	case <-rt.Ready():
		return func() error { return <-done }, nil
	case err := <-done:
		return nil, fmt.Errorf("runtime stopped before ready: %w", err)
	}
}
