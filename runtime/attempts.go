package runtime

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
)

// maxDeliver counts handler runs, not deliveries. The server counts a
// delivery whether or not a handler ever started on it: a message pulled
// into the buffer when its process died (killed by another message, say)
// came back with its count up, and after maxDeliver such deaths its whole
// buffered cohort went to the dead letters "without a handler result",
// never run. So jetfn records, in the KV bucket manifest.AttemptsBucket,
// every run it starts on a redelivered message; the first delivery is
// taken to have run (recording it would cost every message a write). A
// message's attempt number is 1 plus the runs recorded before it, and a
// delivery past maxDeliver is dead-lettered without its handler only when
// maxDeliver runs are recorded. Without the bucket (no right to it),
// deliveries count, as the server's do.

// attemptsTTL bounds how long a message's record is kept: one redelivered
// after longer counts its runs from the first again.
const attemptsTTL = 24 * time.Hour

// attemptStore records handler runs of redelivered messages. A nil kv
// counts deliveries instead.
type attemptStore struct{ bookkeeping }

// openAttempts opens the bucket, creating it with create.
func openAttempts(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest, create bool, log *slog.Logger) *attemptStore {
	return &attemptStore{bookkeeping{log: log, kv: openBookkeeping(ctx, js, m, jetstream.KeyValueConfig{Bucket: manifest.AttemptsBucket, TTL: attemptsTTL,
		Description: "jetfn: handler runs started on redelivered messages"}, create, log,
		"handler runs are not recorded: maxDeliver counts deliveries, those that died before their handler started too")}}
}

// attemptKey names one message of one function's stream.
func attemptKey(function string, msg jetfn.Msg) string {
	identity := msg.StreamIdentity
	if identity == "" {
		identity = "_"
	}
	return function + "." + msg.Stream + "." + identity + "." + strconv.FormatUint(msg.StreamSequence, 10)
}

// attempt is one run about to start: its number, and whether a record of
// it is kept (to be removed once the message is settled).
type attempt struct {
	n        uint64
	recorded bool
}

// next is the attempt number of a run about to start on msg and, with
// record, records it: for a first delivery 1; for a redelivery 1 plus the
// runs recorded before, or the delivery count when nothing can be
// recorded. prior is what the runs before it make: the caller
// dead-letters a message whose prior runs reached maxDeliver without
// starting another.
func (a *attemptStore) next(ctx context.Context, function string, msg jetfn.Msg, record func(prior uint64) bool) attempt {
	if msg.NumDelivered <= 1 {
		return attempt{n: 1}
	}
	if a == nil || a.kv == nil {
		return attempt{n: msg.NumDelivered}
	}
	key := attemptKey(function, msg)
	for range 3 { // a compare-and-set: two instances may start one message at once
		prior, rev, err := a.read(ctx, key)
		if err != nil {
			a.failed(err)
			return attempt{n: msg.NumDelivered}
		}
		if !record(prior) {
			return attempt{n: prior + 1, recorded: rev > 0}
		}
		value := []byte(strconv.FormatUint(prior, 10)) // the first delivery's run is not recorded
		if rev == 0 {
			_, err = a.kv.Create(ctx, key, value)
		} else {
			_, err = a.kv.Update(ctx, key, value, rev)
		}
		if err == nil {
			a.failed(nil)
			return attempt{n: prior + 1, recorded: true}
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			a.failed(err)
			return attempt{n: msg.NumDelivered}
		}
	}
	return attempt{n: msg.NumDelivered}
}

// notRunYet is the record of a message whose first delivery ran no
// handler (it waited for its key's turn, keyrate.go): its next delivery is
// its first run.
const notRunYet = "none"

// notRun records that msg's first delivery ended without a run, where
// next would otherwise take it to have run.
func (a *attemptStore) notRun(ctx context.Context, function string, msg jetfn.Msg) {
	if a == nil || a.kv == nil {
		return
	}
	if _, err := a.kv.Create(ctx, attemptKey(function, msg), []byte(notRunYet)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		a.failed(err)
	}
}

// begun says whether a handler run on msg, delivered again, began on an
// earlier delivery. A scheduled function's tick records its first run
// (firstRun), so for a tick no record means its delivery died before its
// handler started. Where nothing can be read, it says yes: a run that
// may have begun must be completed.
func (a *attemptStore) begun(ctx context.Context, function string, msg jetfn.Msg) bool {
	if msg.NumDelivered <= 1 {
		return false
	}
	if a == nil || a.kv == nil {
		return true
	}
	prior, rev, err := a.read(ctx, attemptKey(function, msg))
	if err != nil {
		a.failed(err)
		return true
	}
	return rev > 0 && prior > 0
}

// firstRun records that msg's first delivery starts its handler, which
// next otherwise takes for granted, and says whether it did: a tick's
// redelivery can then tell a run that began from one that never started
// (begun). It costs a write a tick, not a message of every function.
func (a *attemptStore) firstRun(ctx context.Context, function string, msg jetfn.Msg) bool {
	if a == nil || a.kv == nil || msg.NumDelivered > 1 {
		return false
	}
	_, err := a.kv.Create(ctx, attemptKey(function, msg), []byte("0")) // read counts it as the one run
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		a.failed(err)
		return false
	}
	return true
}

// read is the runs recorded for key, counting the first delivery's, and
// the record's revision (0: none yet).
func (a *attemptStore) read(ctx context.Context, key string) (prior, rev uint64, err error) {
	e, err := a.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 1, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if string(e.Value()) == notRunYet {
		return 0, e.Revision(), nil
	}
	n, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return 1, e.Revision(), nil // unreadable: start over, counting the first run
	}
	return n + 1, e.Revision(), nil
}

// forget removes a settled message's record; one left behind expires.
func (a *attemptStore) forget(ctx context.Context, function string, msg jetfn.Msg) {
	if a == nil || a.kv == nil {
		return
	}
	if err := a.kv.Purge(ctx, attemptKey(function, msg)); err != nil {
		a.log.Debug("removing a settled message's run record; it expires instead", "err", err)
	}
}

func (a *attemptStore) failed(err error) {
	a.wrote(err, "recording a handler run; maxDeliver counts deliveries until it works again")
}
