// Package deploy keeps manifests as revisions in a NATS KV bucket, so
// runtime instances pick up a new manifest without a restart. `jetfn
// deploy` stores a revision, `jetfn rollback` restores the previous one, and
// `jetfn run --deployment NAME` follows the key: every new revision is
// applied by every instance (runtime.Apply), or refused by it.
package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
)

// Bucket is the KV bucket holding one key per deployment.
const Bucket = manifest.ManifestBucket

// History is how many revisions per deployment the bucket keeps, for
// rollback.
const History = 10

// ErrNoPrevious is returned by Rollback when there is no earlier revision.
var ErrNoPrevious = errors.New("no previous revision to roll back to")

// Revision is one stored manifest.
type Revision struct {
	Number uint64
	Raw    []byte
	// Created is when it was stored (set by History).
	Created time.Time
}

// Manifest parses the revision.
func (r Revision) Manifest() (*manifest.Manifest, error) {
	m, err := manifest.Parse(r.Raw)
	if err != nil {
		return nil, fmt.Errorf("revision %d: %w", r.Number, err)
	}
	return m, nil
}

// bucket opens the bucket, creating it on first use; for Store and
// Rollback, which write revisions.
func bucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket, History: History, Description: "jetfn manifests, one key per deployment",
	})
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// open opens the bucket without creating it: an instance only reads
// revisions, so it needs no right to create or update the bucket (see
// manifest.PermissionOptions.Deployment). A missing bucket means nothing
// was deployed yet, so the error is also jetstream.ErrKeyNotFound.
func open(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("opening bucket %s: %w (%w)", Bucket, err, jetstream.ErrKeyNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// Store saves raw as the deployment's new revision.
func Store(ctx context.Context, js jetstream.JetStream, deployment string, raw []byte) (uint64, error) {
	kv, err := bucket(ctx, js)
	if err != nil {
		return 0, err
	}
	rev, err := kv.Put(ctx, deployment, raw)
	if err != nil {
		return 0, fmt.Errorf("storing deployment %s: %w", deployment, err)
	}
	return rev, nil
}

// Load returns the deployment's current revision; jetstream.ErrKeyNotFound
// when nothing was deployed yet.
func Load(ctx context.Context, js jetstream.JetStream, deployment string) (Revision, error) {
	kv, err := open(ctx, js)
	if err != nil {
		return Revision{}, fmt.Errorf("loading deployment %s: %w", deployment, err)
	}
	e, err := kv.Get(ctx, deployment)
	if err != nil {
		return Revision{}, fmt.Errorf("loading deployment %s: %w", deployment, err)
	}
	return Revision{Number: e.Revision(), Raw: e.Value()}, nil
}

// ErrChangedMeanwhile is a rollback that lost a race: the deployment got
// a new revision between reading its history and storing the rollback.
var ErrChangedMeanwhile = errors.New("the deployment changed while rolling back; look at its revisions and try again")

// Rollback stores, as the newest revision, the manifest of the revision
// before the current one, so every instance following the deployment
// applies it. The current revision counts as the one it restored when it
// is itself a rollback, so a second rollback goes on back instead of
// undoing the first. The store is a compare-and-set on the current
// revision: of two rollbacks at once, one stores and the other returns
// ErrChangedMeanwhile. It opens the bucket without creating or updating
// it (a missing bucket has nothing to roll back to), so it needs no rights
// on the bucket's configuration.
func Rollback(ctx context.Context, js jetstream.JetStream, deployment string) (from, to Revision, err error) {
	kv, err := open(ctx, js)
	if err != nil {
		return from, to, err
	}
	history, err := kv.History(ctx, deployment)
	if err != nil {
		return from, to, fmt.Errorf("reading the history of %s: %w", deployment, err)
	}
	restored, err := readRestored(ctx, kv, deployment)
	if err != nil {
		return from, to, err
	}
	cur, target, ok := rollbackTarget(puts(history), restored)
	if !ok {
		return from, to, ErrNoPrevious
	}
	rev, err := kv.Update(ctx, deployment, target.Value(), cur.Revision())
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return from, to, ErrChangedMeanwhile
	}
	if err != nil {
		return from, to, fmt.Errorf("restoring revision %d: %w", target.Revision(), err)
	}
	restored[rev] = target.Revision()
	if err := writeRestored(ctx, kv, deployment, restored, history[0].Revision()); err != nil {
		return from, to, err
	}
	return Revision{Number: cur.Revision(), Raw: cur.Value()}, Revision{Number: rev, Raw: target.Value()}, nil
}

func puts(history []jetstream.KeyValueEntry) []jetstream.KeyValueEntry {
	var out []jetstream.KeyValueEntry
	for _, e := range history {
		if e.Operation() == jetstream.KeyValuePut {
			out = append(out, e)
		}
	}
	return out
}

// rollbackTarget is the current revision and the one a rollback restores:
// the revision before the current one, where a rollback counts as the
// revision it restored (restored maps a rollback's revision to it).
func rollbackTarget(puts []jetstream.KeyValueEntry, restored map[uint64]uint64) (cur, target jetstream.KeyValueEntry, ok bool) {
	if len(puts) == 0 {
		return nil, nil, false
	}
	cur = puts[len(puts)-1]
	origin := cur.Revision()
	for {
		r, isRollback := restored[origin]
		if !isRollback {
			break
		}
		origin = r
	}
	for i := len(puts) - 1; i > 0; i-- {
		if puts[i].Revision() <= origin {
			return cur, puts[i-1], true
		}
	}
	return cur, nil, false
}

// restoredKey holds, per deployment, which revision each of its rollbacks
// restored; instances never read it (they watch the deployment's own key).
func restoredKey(deployment string) string { return "_rollbacks." + deployment }

func readRestored(ctx context.Context, kv jetstream.KeyValue, deployment string) (map[uint64]uint64, error) {
	restored := map[uint64]uint64{}
	e, err := kv.Get(ctx, restoredKey(deployment))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return restored, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the rollbacks of %s: %w", deployment, err)
	}
	if err := json.Unmarshal(e.Value(), &restored); err != nil {
		return nil, fmt.Errorf("reading the rollbacks of %s: %w", deployment, err)
	}
	return restored, nil
}

// writeRestored stores the rollbacks still in the history (from oldest).
func writeRestored(ctx context.Context, kv jetstream.KeyValue, deployment string, restored map[uint64]uint64, oldest uint64) error {
	for rev := range restored {
		if rev < oldest {
			delete(restored, rev)
		}
	}
	raw, err := json.Marshal(restored)
	if err == nil {
		_, err = kv.Put(ctx, restoredKey(deployment), raw)
	}
	if err != nil {
		return fmt.Errorf("recording the rollback of %s: %w", deployment, err)
	}
	return nil
}

// Follow applies every revision of the deployment newer than `after` to rt
// until ctx is done. A revision rt refuses is logged (and shown in rt's
// status); rt keeps running the previous one. A refusal that may pass
// (runtime.ErrRevisionInvalid not among its causes: an API timeout, an
// outage, a consumer not created yet) is tried again, with a backoff of
// retryFirst doubling to retryMax, until the revision applies or a newer
// one arrives: an instance left on an old revision diverges from the
// others.
func Follow(ctx context.Context, js jetstream.JetStream, deployment string, after uint64, rt *runtime.Runtime, log *slog.Logger) error {
	kv, err := open(ctx, js)
	if err != nil {
		return err
	}
	w, err := kv.Watch(ctx, deployment)
	if err != nil {
		return fmt.Errorf("watching deployment %s: %w", deployment, err)
	}
	defer func() { _ = w.Stop() }()
	f := follower{rt: rt, log: log}
	defer f.stopRetry()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.retryC():
			f.apply(ctx)
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil || e.Revision() <= after || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			after = e.Revision()
			f.pending, f.delay = &Revision{Number: e.Revision(), Raw: e.Value()}, 0
			f.apply(ctx)
		}
	}
}

// Backoff of a revision refused for a reason that may pass.
const (
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// follower applies the newest revision, and retries it while its refusal
// may pass.
type follower struct {
	rt      *runtime.Runtime
	log     *slog.Logger
	pending *Revision
	delay   time.Duration
	retry   *time.Timer
}

func (f *follower) retryC() <-chan time.Time {
	if f.retry == nil {
		return nil
	}
	return f.retry.C
}

func (f *follower) stopRetry() {
	if f.retry != nil {
		f.retry.Stop()
		f.retry = nil
	}
}

// apply applies the pending revision; a refusal that may pass schedules
// the next try.
func (f *follower) apply(ctx context.Context) {
	f.stopRetry()
	rev := f.pending
	if rev == nil {
		return
	}
	err := f.rt.ApplyYAML(ctx, rev.Raw)
	if err == nil {
		f.rt.SetRevision(rev.Number)
		f.pending = nil
		f.log.Info("applied deployment revision", "revision", rev.Number, "manifest_digest", f.rt.Manifest().Digest)
		return
	}
	if errors.Is(err, runtime.ErrRevisionInvalid) || ctx.Err() != nil {
		f.pending = nil
		f.log.Error("refused deployment revision", "revision", rev.Number, "err", err)
		return
	}
	f.delay = min(max(2*f.delay, retryFirst), retryMax)
	f.retry = time.NewTimer(f.delay)
	f.log.Warn("refused deployment revision; trying it again", "revision", rev.Number, "in", f.delay, "err", err)
}
