// Package deploy keeps manifests as revisions in a NATS KV bucket, so
// runtime instances pick up a new manifest without a restart. `jetfn
// deploy` stores a revision, `jetfn rollback` restores the previous one, and
// `jetfn run --deployment NAME` follows the key: every new revision is
// applied by every instance (runtime.Apply), or refused by it.
package deploy

import (
	"context"
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

// Rollback stores the revision before the current one as the newest, so
// every instance following the deployment applies it. It opens the bucket
// without creating or updating it (a missing bucket has nothing to roll
// back to), so it needs no rights on the bucket's configuration.
func Rollback(ctx context.Context, js jetstream.JetStream, deployment string) (from, to Revision, err error) {
	kv, err := open(ctx, js)
	if err != nil {
		return from, to, err
	}
	history, err := kv.History(ctx, deployment)
	if err != nil {
		return from, to, fmt.Errorf("reading the history of %s: %w", deployment, err)
	}
	var puts []jetstream.KeyValueEntry
	for _, e := range history {
		if e.Operation() == jetstream.KeyValuePut {
			puts = append(puts, e)
		}
	}
	if len(puts) < 2 {
		return from, to, ErrNoPrevious
	}
	cur, prev := puts[len(puts)-1], puts[len(puts)-2]
	rev, err := kv.Put(ctx, deployment, prev.Value())
	if err != nil {
		return from, to, fmt.Errorf("restoring revision %d: %w", prev.Revision(), err)
	}
	return Revision{Number: cur.Revision(), Raw: cur.Value()}, Revision{Number: rev, Raw: prev.Value()}, nil
}

// Follow applies every revision of the deployment newer than `after` to rt
// until ctx is done. A revision rt refuses is logged (and shown in rt's
// status); rt keeps running the previous one.
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
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil || e.Revision() <= after || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			after = e.Revision()
			apply(ctx, rt, Revision{Number: e.Revision(), Raw: e.Value()}, log)
		}
	}
}

func apply(ctx context.Context, rt *runtime.Runtime, rev Revision, log *slog.Logger) {
	if err := rt.ApplyYAML(ctx, rev.Raw); err != nil {
		log.Error("refused deployment revision", "revision", rev.Number, "err", err)
		return
	}
	log.Info("applied deployment revision", "revision", rev.Number, "manifest_digest", rt.Manifest().Digest)
}
