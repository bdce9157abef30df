package runtime

import (
	"context"
	"errors"
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
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		cfg.History, cfg.Replicas = 1, maxReplicas(m)
		kv, err = js.CreateKeyValue(ctx, cfg)
	}
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
