package runtime

// Rate limit (manifest rateLimit): a message is handed to a worker only at
// its turn on a schedule all the function's instances share, and the
// puller asks for the next only once it has had its turn, so the messages
// the rate holds back wait on the server, where their ack wait does not
// run, instead of in a buffer.

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// rateBurstWindow is how much of the allowance a schedule left idle saves
// up: a tenth of a second's worth (at least one message), so a message
// that comes after a quiet spell does not wait a full interval.
const rateBurstWindow = 100 * time.Millisecond

// pace is a rate's schedule arithmetic (GCRA): messages are spaced an
// interval apart, and a schedule left idle holds at most burst of them.
type pace struct {
	interval time.Duration
	burst    int
}

func newPace(r manifest.Rate) pace {
	interval := r.Interval()
	return pace{interval: interval, burst: max(1, int(rateBurstWindow/max(interval, 1)))}
}

// grant takes up to want messages at now from a schedule whose next free
// slot is next (unix nanoseconds): how many, the schedule's new next slot,
// and, when none is free yet, how long until one is.
func (p pace) grant(next, now int64, want int) (n int, newNext int64, wait time.Duration) {
	iv := int64(p.interval)
	// No grant of this pace leaves the next slot more than an interval
	// ahead: one further out was written under a slower rate, or by a
	// clock far ahead, and would stall the function.
	next = min(next, now+iv)
	if earliest := now - int64(p.burst-1)*iv; next < earliest {
		next = earliest // an idle schedule saves up no more than a burst
	}
	if next > now {
		return 0, next, time.Duration(next - now)
	}
	n = min(want, p.burst, int((now-next)/iv)+1)
	return n, next + int64(n)*iv, 0
}

// schedule is a rate's shared schedules in manifest.RatesBucket: one per
// KV key, each taken from by every instance with a compare-and-set.
type schedule struct {
	pace    pace
	kv      *sharedKV
	log     *slog.Logger
	failing atomic.Bool
}

// rateLimiter paces one function's messages. Its schedule is the
// function's key in manifest.RatesBucket, shared by every instance (a
// compare-and-set per grant). A message's turn is taken when it arrives,
// not when it is asked for: a rate-limited binding keeps one pull request
// of one message open (binding.pull), so an empty request wastes no turn
// and a backlog that lands finds no pile of open requests to fill at once.
type rateLimiter struct {
	schedule
	key string
	// mu orders the grants of the function's main and backfill pullers,
	// which share the limiter.
	mu sync.Mutex
	// held is how many pulled messages wait for their turn now (stats:
	// rate_held); the rest of what the rate holds back is the consumer's
	// pending.
	held atomic.Int64
}

func newRateLimiter(r manifest.Rate, kv *sharedKV, function string, log *slog.Logger) *rateLimiter {
	return &rateLimiter{schedule: schedule{pace: newPace(r), kv: kv, log: log}, key: function}
}

// await waits for one message's turn; false if ctx ended first.
func (l *rateLimiter) await(ctx context.Context) bool {
	l.held.Add(1)
	defer l.held.Add(-1)
	for ctx.Err() == nil {
		l.mu.Lock()
		ok, wait := l.take(ctx, l.key)
		l.mu.Unlock()
		if ok {
			return true
		}
		pause(ctx, wait)
	}
	return false
}

// take takes one message's turn from the schedule under key if it has one
// now, else says how long until it may.
func (l *schedule) take(ctx context.Context, key string) (bool, time.Duration) {
	kv, err := l.kv.get(ctx)
	if err != nil {
		return false, l.failed(ctx, err)
	}
	for range 5 { // a compare-and-set: other instances take from it too
		next, rev, err := l.read(ctx, kv, key)
		if err != nil {
			return false, l.failed(ctx, err)
		}
		n, newNext, wait := l.pace.grant(next, time.Now().UnixNano(), 1)
		if n == 0 {
			return false, wait
		}
		value := []byte(strconv.FormatInt(newNext, 10))
		if rev == 0 {
			_, err = kv.Create(ctx, key, value)
		} else {
			_, err = kv.Update(ctx, key, value, rev)
		}
		if err == nil {
			l.failing.Store(false)
			return true, 0
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return false, l.failed(ctx, err)
		}
	}
	return false, rateContendedWait // other instances won the slots: look again soon
}

// rateContendedWait is how long a grant that lost its compare-and-sets to
// other instances waits before it reads the schedule again.
const rateContendedWait = 10 * time.Millisecond

// read is the schedule's next slot and its revision (0: no schedule yet).
func (l *schedule) read(ctx context.Context, kv jetstream.KeyValue, key string) (next int64, rev uint64, err error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	next, err = strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		return 0, e.Revision(), nil // unreadable: start the schedule again
	}
	return next, e.Revision(), nil
}

// failed logs the first of a run of failures, and says how long to wait
// before trying again: nothing is let through while the schedule cannot be
// read, since the rate could not be kept.
func (l *schedule) failed(ctx context.Context, err error) time.Duration {
	if !l.failing.Swap(true) && ctx.Err() == nil {
		l.log.Warn("reading the rate limit's schedule; no message is handled until it can be", "bucket", manifest.RatesBucket, "err", err)
	}
	return time.Second
}
