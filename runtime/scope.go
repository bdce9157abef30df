package runtime

import (
	"context"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// A function's outputs and dead letters carry message IDs scoped by a name
// (jetfn.OutputMsgID, DeadLetterMsgID), so the stream drops a repeat of one
// output or dead letter. Scoped by the function's current name, a rename
// would give every message handled again around the rename a second
// output: the old and the new name's. So the scope is the name the
// function's consumer was first created under, kept in the consumer's
// metadata; a consumer created for a function renamedFrom another takes
// the old one's scope, and the position record carries it too, for a
// consumer the rename's deploy pruned.

// scopeKey is the consumer metadata key of the scope.
const scopeKey = "jetfn.scope"

// idScope is the name a binding scopes its output and dead-letter IDs by;
// set when it connects to its consumer.
type idScope struct {
	name atomic.Pointer[string]
}

func newIDScope(name string) *idScope {
	s := &idScope{}
	s.set(name)
	return s
}

func (s *idScope) set(name string) { s.name.Store(&name) }

func (s *idScope) get() string { return *s.name.Load() }

// scopeOf is the scope a consumer's metadata names, else the function's
// name (a consumer made before jetfn kept one).
func scopeOf(cfg jetstream.ConsumerConfig, f manifest.FunctionSpec) string {
	if s := cfg.Metadata[scopeKey]; s != "" {
		return s
	}
	return f.Name
}

// decideScope is the scope of a consumer jetfn creates for f: the one its
// own position record kept (a consumer deleted, pruned or renamed as a
// durable), else, for a function renamedFrom another whose consumer or
// record is known, the old one's, else f's own name.
func decideScope(ctx context.Context, s jetstream.Stream, f manifest.FunctionSpec, positions *positionStore) string {
	if pos, err := positions.lookup(ctx, f.Stream, f.Durable, f.Name); err == nil && pos != nil && pos.Scope != "" {
		return pos.Scope
	}
	if f.RenamedFrom == "" {
		return f.Name
	}
	pos, err := positions.lookup(ctx, f.Stream, "", f.RenamedFrom)
	if err != nil || pos == nil {
		return f.Name // nothing of the old function is known: no lineage to keep
	}
	if old, err := s.Consumer(ctx, pos.Durable); err == nil {
		return scopeOf(old.CachedInfo().Config, manifest.FunctionSpec{Name: f.RenamedFrom})
	}
	if pos.Scope != "" {
		return pos.Scope
	}
	return f.RenamedFrom
}
