package runtime

// Singleton (manifest singleton): one instance pulls the function's
// messages at a time. The instances contend for a lease, a key of the KV
// bucket manifest.LeasesBucket holding the holder and the time the lease
// runs to; the holder renews it, the end of its last binding's drain hands
// it over, and a holder that died stops renewing, so another takes it once
// it has run out.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// leaseTerm is how long a lease runs without a renewal: how long the
// function waits for a new holder after one dies. The holder renews it
// every fifth of that.
const leaseTerm = 5 * time.Second

// leaseValue is a lease as the bucket stores it.
type leaseValue struct {
	Holder string `json:"holder"`
	// Until is when the lease runs out (unix nanoseconds); 0 once released.
	Until int64 `json:"until"`
}

// lease is one runtime's side of a singleton function's lease, shared by
// every binding of the function in the runtime (Runtime.leaseOf): a live
// deploy's new binding pulls under the lease the old one still drains
// under, both in this one instance.
type lease struct {
	kv     *sharedKV
	key    string
	holder string
	term   time.Duration
	log    *slog.Logger
	// held is whether the bucket says this runtime holds it; validUntil
	// (a monotonic instant, monoNow) is when this runtime stops counting
	// on it without a renewal: two fifths of the term before it runs out,
	// measured from before the renewal was sent, so a pull request asked
	// just before then (it lives a pullWait) is over before another
	// instance may take the lease, with a second to spare for clocks apart.
	held       atomic.Bool
	validUntil atomic.Int64
	// refs counts the bindings using the lease; the first starts keep,
	// the last one's end stops it (and releases the lease).
	mu      sync.Mutex
	refs    int
	stop    context.CancelFunc
	stopped chan struct{}
	// rev is the revision of the runtime's last write: only keep's
	// goroutine touches it.
	rev uint64
}

func newLease(kv *sharedKV, function, holder string, log *slog.Logger) *lease {
	return &lease{kv: kv, key: function, holder: holder, term: leaseTerm, log: log}
}

// use is a binding starting under the lease: the first one starts keeping
// it. done, called once the binding's drain is over, is the end of that
// use: after the last one the lease is released for another instance.
func (l *lease) use() (done func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == 0 {
		ctx, cancel := context.WithCancel(context.Background())
		l.stop, l.stopped = cancel, make(chan struct{})
		go func() {
			defer close(l.stopped)
			l.keep(ctx)
		}()
	}
	l.refs++
	return sync.OnceFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.refs--; l.refs == 0 {
			l.stop()
			<-l.stopped
		}
	})
}

// holds reports whether this runtime may ask for messages now.
func (l *lease) holds() bool { return l.held.Load() && monoNow() < l.validUntil.Load() }

// keep contends for the lease and renews it while held, until ctx is done;
// then it releases a lease it holds.
func (l *lease) keep(ctx context.Context) {
	l.step(ctx)
	repeat(ctx, func() time.Duration { return l.term / 5 }, nil, l.step)
	l.release()
}

// step takes the lease if it is free, run out or this runtime's, and says
// whether this runtime holds it now. Each call is bounded by a renewal
// interval, so a hung request cannot stretch a lease this runtime holds.
func (l *lease) step(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, l.term/5)
	defer cancel()
	sent := monoNow()
	now := time.Now().UnixNano()
	kv, err := l.kv.get(ctx)
	if err != nil {
		l.failed(err)
		return
	}
	e, err := kv.Get(ctx, l.key)
	var cur leaseValue
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		e = nil
	case err != nil:
		l.failed(err)
		return
	default:
		if json.Unmarshal(e.Value(), &cur) != nil {
			cur = leaseValue{} // unreadable: free
		}
	}
	if cur.Holder != l.holder && cur.Until > now {
		l.set(false)
		return
	}
	raw, _ := json.Marshal(leaseValue{Holder: l.holder, Until: now + int64(l.term)})
	if e == nil {
		l.rev, err = kv.Create(ctx, l.key, raw)
	} else {
		l.rev, err = kv.Update(ctx, l.key, raw, e.Revision())
	}
	if err != nil {
		l.failed(err)
		return
	}
	l.validUntil.Store(sent + int64(l.term-2*l.term/5))
	l.set(true)
}

// failed keeps a lease this runtime holds through a failed renewal until
// validUntil, which holds stops honouring by itself; the lease is then
// counted lost.
func (l *lease) failed(err error) {
	if l.held.Load() && monoNow() >= l.validUntil.Load() {
		l.log.Warn("singleton lease not renewed: stopped pulling", "bucket", manifest.LeasesBucket, "err", err)
		l.set(false)
	}
}

func (l *lease) set(held bool) {
	if held != l.held.Load() {
		l.log.Info("singleton", "active", held)
	}
	l.held.Store(held)
}

// release frees a lease this runtime holds, so another instance takes
// over at its next look instead of when the lease runs out.
func (l *lease) release() {
	if !l.held.Load() {
		return
	}
	l.set(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	kv, err := l.kv.get(ctx)
	if err == nil {
		raw, _ := json.Marshal(leaseValue{Holder: l.holder})
		_, err = kv.Update(ctx, l.key, raw, l.rev)
	}
	if err != nil {
		l.log.Warn("releasing the singleton lease; it runs out instead", "err", err)
	}
}

// await returns once this runtime holds the lease, or ctx is done.
func (l *lease) await(ctx context.Context) {
	for !l.holds() && ctx.Err() == nil {
		pause(ctx, l.term/20)
	}
}
