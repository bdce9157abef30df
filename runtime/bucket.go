package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// bookkeeping is a KV bucket jetfn keeps for itself (positions, handler
// runs). Its records are a fallback, never a reason to stop: without the
// bucket (no right to it) kv is nil and its store does without, and a
// failing write is logged once until one succeeds, not per message.
type bookkeeping struct {
	kv  jetstream.KeyValue
	log *slog.Logger

	mu      sync.Mutex
	failing bool // the last write failed
}

// openBookkeeping opens cfg.Bucket, creating it (with create) on first use
// with the manifest's highest stream replication; nil when it cannot be
// had. withoutIt says, in the warning logged then, what jetfn does instead.
func openBookkeeping(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest, cfg jetstream.KeyValueConfig,
	create bool, log *slog.Logger, withoutIt string) jetstream.KeyValue {
	kv, err := openShared(ctx, js, m, cfg, create)
	if err != nil {
		log.Warn(withoutIt, "bucket", cfg.Bucket, "err", err)
		return nil
	}
	return kv
}

// wrote notes a write's outcome, warning with what on the first failure.
func (b *bookkeeping) wrote(err error, what string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil && !b.failing {
		b.log.Warn(what, append(args, "err", err)...)
	}
	b.failing = err != nil
}

func maxReplicas(m *manifest.Manifest) int {
	n := 1
	for _, s := range m.Streams {
		n = max(n, s.Replicas)
	}
	return n
}

// sharedKV is a bucket the instances of a function share to agree (a rate
// limit's schedule, a singleton's lease). It is opened on first use and
// again after every failure, so a bucket that could not be had at bind
// time (an election, a timeout) is found later; until then its users hold
// back rather than do without, since doing without would break what the
// bucket promises.
type sharedKV struct {
	open func(ctx context.Context) (jetstream.KeyValue, error)
	mu   sync.Mutex
	kv   jetstream.KeyValue
}

// get is the bucket, opening it if it is not open yet.
func (s *sharedKV) get(ctx context.Context) (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	kv, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	s.kv = kv
	return kv, nil
}

// openShared opens cfg.Bucket, creating it (with create) with the
// manifest's highest stream replication.
func openShared(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest, cfg jetstream.KeyValueConfig, create bool) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		cfg.History, cfg.Replicas = 1, maxReplicas(m)
		kv, err = js.CreateKeyValue(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("opening KV bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}
