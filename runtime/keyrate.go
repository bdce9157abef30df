package runtime

// Rate per key (manifest keyRateLimit): before a keyed function's message
// runs, it takes a turn from its key's schedule; a message whose key has no
// turn yet goes back to the server with a Nak that delays its redelivery
// until the turn comes. It waits there, where its ack wait does not run,
// and frees its worker for other partitions; its partition hands out
// nothing else meanwhile (ordered: its one message is the key's next), so
// the key's order holds. A key's turn must be asked for with its message
// in hand, so unlike rateLimit it cannot be a pull-side limit: the pull
// cannot know the key of the message it will get.

import (
	"context"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
)

// keyRateLimiter paces each key of one keyed function, all its instances
// together: one schedule per key in manifest.RatesBucket, which forgets a
// key idle for manifest.RatesTTL, so an idle key costs at most one entry
// for a day and nothing in the process.
type keyRateLimiter struct {
	schedule
	function string
	// deferred counts the messages sent back to wait for their key's turn;
	// waiting, those whose delay has not run out yet (this instance's).
	deferred atomic.Uint64
	waiting  atomic.Int64
}

func newKeyRateLimiter(r manifest.Rate, kv *sharedKV, function string, log *slog.Logger) *keyRateLimiter {
	return &keyRateLimiter{schedule: schedule{pace: newPace(r), kv: kv, log: log}, function: function}
}

// scheduleOf is key's schedule's name in the bucket: a hash, since a key
// may hold any byte and KV keys may not.
func (l *keyRateLimiter) scheduleOf(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return l.function + ".key." + strconv.FormatUint(h.Sum64(), 36)
}

// turn takes a turn for key now, or says how long until one is free.
func (l *keyRateLimiter) turn(ctx context.Context, key string) (bool, time.Duration) {
	return l.take(ctx, l.scheduleOf(key))
}

// keyTurn is the key rate's step of a delivery about to run: true if
// msg's key has a turn now, else how long until it has one.
func (b *binding) keyTurn(ctx context.Context, m *nats.Msg, msg jetfn.Msg) (bool, time.Duration) {
	return b.keyRate.turn(ctx, b.keyOf(m, msg))
}

// deferToKeyTurn sends a delivery back to the server to wait
// wait for its key's turn, uncounted as a run. The caller has taken it off
// the keeper first: a heartbeat after the Nak would reset the server's
// timer to a full ack wait.
func (b *binding) deferToKeyTurn(ctx context.Context, m *nats.Msg, msg jetfn.Msg, wait time.Duration) {
	if msg.NumDelivered <= 1 {
		// The next delivery must not count this one as a run (attempts.go).
		b.attempts.notRun(ctx, b.spec.Name, msg)
	}
	if err := m.NakWithDelay(wait); err != nil {
		b.msgLog(msg).Warn("sending a message back to wait for its key's turn", "err", err)
		return
	}
	b.keyRate.deferred.Add(1)
	b.keyRate.waiting.Add(1)
	time.AfterFunc(wait, func() { b.keyRate.waiting.Add(-1) })
}
