package runtime

import (
	"context"

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
	if b.remote != nil {
		r.probeRemotesNow()
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
// back to the stream), then unregisters it. Its durable consumer stays.
func (a *active) stop() {
	a.cancel()
	<-a.done
	_ = a.svc.Stop()
}
