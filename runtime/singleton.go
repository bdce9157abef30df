package runtime

// Singleton (manifest singleton): one instance pulls the function's
// messages at a time. The instances contend for a lease, a key of the KV
// bucket manifest.LeasesBucket holding the holder and the time the lease
// runs to; the holder renews it, a drain hands it over, and a holder that
// died stops renewing, so another takes it once it has run out.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// leaseTerm is how long a lease runs without a renewal: how long the
// function waits for a new holder after one dies. The holder renews it
// every fifth of that, and counts itself the holder only up to a fifth
// before it runs out, for clocks a little apart.
const leaseTerm = 5 * time.Second

// leaseValue is a lease as the bucket stores it.
type leaseValue struct {
	Holder string `json:"holder"`
	// Until is when the lease runs out (unix nanoseconds); 0 once released.
	Until int64 `json:"until"`
}

// lease is one instance's side of a singleton function's lease.
type lease struct {
	kv     jetstream.KeyValue
	key    string
	holder string
	term   time.Duration
	log    *slog.Logger
	// held is whether this instance may pull now.
	held atomic.Bool
	// rev and until are the instance's own lease, while it has one: only
	// keep's goroutine touches them.
	rev   uint64
	until int64
}

func newLease(kv jetstream.KeyValue, function, holder string, log *slog.Logger) *lease {
	return &lease{kv: kv, key: function, holder: holder, term: leaseTerm, log: log}
}

// keep contends for the lease and renews it while held, until ctx is done;
// then it releases a lease it holds, so another instance takes over at
// once. Without a bucket (kv nil) this instance always holds it: the
// function is then a singleton per instance only (logged at start).
func (l *lease) keep(ctx context.Context) {
	if l.kv == nil {
		l.held.Store(true)
		return
	}
	l.step(ctx)
	repeat(ctx, func() time.Duration { return l.term / 5 }, nil, l.step)
	l.release()
}

// step takes the lease if it is free, run out or this instance's, and says
// whether this instance holds it now.
func (l *lease) step(ctx context.Context) {
	now := time.Now().UnixNano()
	e, err := l.kv.Get(ctx, l.key)
	var cur leaseValue
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		l.stillHeld(now, err)
		return
	default:
		if json.Unmarshal(e.Value(), &cur) != nil {
			cur = leaseValue{} // unreadable: free
		}
	}
	if cur.Holder != l.holder && cur.Until > now {
		l.set(false, 0, 0)
		return
	}
	until := now + int64(l.term)
	raw, _ := json.Marshal(leaseValue{Holder: l.holder, Until: until})
	var rev uint64
	if e == nil {
		rev, err = l.kv.Create(ctx, l.key, raw)
	} else {
		rev, err = l.kv.Update(ctx, l.key, raw, e.Revision())
	}
	if err != nil {
		l.stillHeld(now, err)
		return
	}
	l.set(true, rev, until)
}

// stillHeld keeps a lease this instance holds through a failed renewal
// until it nearly runs out: no other instance can take it before then.
func (l *lease) stillHeld(now int64, err error) {
	if l.held.Load() && now < l.until-int64(l.term/5) {
		return
	}
	if l.held.Load() {
		l.log.Warn("singleton lease lost: stopped pulling", "bucket", manifest.LeasesBucket, "err", err)
	}
	l.set(false, 0, 0)
}

func (l *lease) set(held bool, rev uint64, until int64) {
	if held != l.held.Load() {
		l.log.Info("singleton", "active", held)
	}
	l.rev, l.until = rev, until
	l.held.Store(held)
}

// release frees a lease this instance holds.
func (l *lease) release() {
	if !l.held.Load() {
		return
	}
	l.held.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	raw, _ := json.Marshal(leaseValue{Holder: l.holder})
	_, err := l.kv.Update(ctx, l.key, raw, l.rev)
	switch {
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		// Renewed since by this instance's next binding of the function
		// (a live deploy re-binds it before the old binding drains).
	case err != nil:
		l.log.Warn("releasing the singleton lease; it runs out instead", "err", err)
	}
}

// await returns once this instance holds the lease, or ctx is done.
func (l *lease) await(ctx context.Context) {
	for !l.held.Load() && ctx.Err() == nil {
		pause(ctx, l.term/20)
	}
}
