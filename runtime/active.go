package runtime

import (
	"context"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/nats-io/nats.go/micro"
)

// active is one function in service: its binding's goroutine and its micro
// service, and how to stop them.
type active struct {
	b      *binding
	svc    micro.Service
	cancel context.CancelFunc
	done   chan struct{}
}

// activate connects a prepared binding to its consumer, registers it and
// starts handling.
func (r *Runtime) activate(ctx context.Context, b *binding, m *manifest.Manifest) (*active, error) {
	if err := r.connect(ctx, b, m); err != nil {
		return nil, err
	}
	svc, err := b.addService(r.nc, m.Digest)
	if err != nil {
		return nil, err
	}
	// The binding's own context: Run's ctx ends every binding at shutdown
	// through stopAll, and Apply ends one at a time through stop.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &active{b: b, svc: svc, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		b.run(runCtx, r.opts.drainTimeout)
	}()
	return a, nil
}

// stop drains the function (in-flight handlers finish, buffered messages go
// back to the stream), unregisters it and closes its handler. Its durable
// consumer stays.
func (a *active) stop() {
	a.cancel()
	<-a.done
	_ = a.svc.Stop()
	a.b.closeHandler()
}

// handlerCloseTimeout bounds a handler's Close (jetfn.Closer).
const handlerCloseTimeout = 10 * time.Second

// closeHandler calls the handler's Close, if it has one: once, after the
// binding drained, or for a binding prepared and never started. A
// backfill's binding shares its function's handler and never closes it.
func (b *binding) closeHandler() {
	c, ok := b.handler.(jetfn.Closer)
	if !ok {
		return
	}
	b.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), handlerCloseTimeout)
		defer cancel()
		// A Close that ignores its context must not hold a drain, an
		// Apply or the shutdown: it is left running past the timeout.
		done := make(chan error, 1)
		go func() { done <- c.Close(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				b.log.Warn("closing the handler", "err", err)
			}
		case <-ctx.Done():
			b.log.Error("the handler's Close ignored its context; left it running", "timeout", handlerCloseTimeout)
		}
	})
}

// closeHandlers closes the handlers of prepared bindings that will not run.
func closeHandlers(bs []*binding) {
	for _, b := range bs {
		b.closeHandler()
	}
}
