package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// A consumer can vanish while nothing of jetfn runs: `nats consumer rm`
// with every instance down, a durable renamed in a deploy, a function
// pruned and added back, a stream restored without its consumers. A
// consumer created again from the manifest alone would start from every
// stored message, outside any duplicate window. So jetfn records each
// consumer's ack floor in the KV bucket manifest.PositionsBucket, with
// the identity of the stream it counts in, and a consumer it creates
// resumes just after the floor it recorded (start.go).

// position is one consumer's progress as jetfn last recorded it.
type position struct {
	Function string `json:"function"`
	Stream   string `json:"stream"`
	// StreamIdentity names the stream's incarnation: a floor counts in
	// the sequences of that incarnation only.
	StreamIdentity string   `json:"stream_identity"`
	Durable        string   `json:"durable"`
	AckFloor       uint64   `json:"ack_floor"`
	Filter         []string `json:"filter"`
	// Scope is the name the function's outputs and dead letters are scoped
	// by (scope.go).
	Scope string `json:"scope,omitempty"`
	// Into is, for a keyed function's router, the identity of the keyed
	// stream its copies went into: its floor says what was copied, and
	// copies count only while that keyed stream lives (keyedresume.go).
	Into string `json:"into,omitempty"`
	// HandledThrough are the consumer's handled-through notes: how far
	// the function got on each subject a deploy dropped from its filter
	// (filterchange.go). A consumer created from this record keeps them,
	// so a later widening does not hand those subjects over again.
	HandledThrough map[string]uint64 `json:"handled_through,omitempty"`
	At             time.Time         `json:"at"`
}

// consumerKey and functionKey are the two keys a position is recorded
// under: by durable, and by function name, which finds it again after the
// durable was renamed.
func consumerKey(stream, durable string) string  { return "consumer." + stream + "." + durable }
func functionKey(stream, function string) string { return "function." + stream + "." + function }

// lineageKey is a third key: by the scope the function's outputs are named
// by, which it keeps through renames (scope.go). A rollback that goes
// back to an older name carries no renamedFrom, since the name it leaves
// is the newer one; it finds under this key how far the function got
// under that newer name.
func lineageKey(stream, scope string) string { return "scope." + stream + "." + scope }

// positionStore records and looks up positions. A nil kv (no bucket, and
// no right to create one) makes it do nothing: consumers then start as
// the manifest says.
type positionStore struct{ bookkeeping }

// openPositions opens the bucket, creating it (with create) on first use.
func openPositions(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest, create bool, log *slog.Logger) *positionStore {
	return &positionStore{bookkeeping{log: log, kv: openBookkeeping(ctx, js, m, jetstream.KeyValueConfig{Bucket: manifest.PositionsBucket,
		Description: "jetfn: each durable consumer's last recorded ack floor"}, create, log,
		"consumer positions are not recorded: a consumer lost while jetfn is down starts as the manifest's start says")}}
}

// record stores pos under its consumer key and, asFunction, under its
// function and lineage keys too (not for a durable the function has moved
// off). A failure is logged once, not returned: a position is a fallback,
// and the next look records again.
func (p *positionStore) record(ctx context.Context, pos position, asFunction bool) {
	if p == nil || p.kv == nil {
		return
	}
	pos.At = time.Now().UTC()
	raw, err := json.Marshal(pos)
	keys := []string{consumerKey(pos.Stream, pos.Durable)}
	if asFunction {
		keys = append(keys, functionKey(pos.Stream, pos.Function))
		if pos.Scope != "" {
			keys = append(keys, lineageKey(pos.Stream, pos.Scope))
		}
	}
	for _, key := range keys {
		if err == nil {
			_, err = p.kv.Put(ctx, key, raw)
		}
	}
	p.wrote(err, "recording a consumer position", "consumer", pos.Durable)
}

// lookup is the recorded position of durable on stream, else the latest
// recorded for any of functions on stream (a durable renamed, or the
// function renamed from one of them); nil when there is none.
func (p *positionStore) lookup(ctx context.Context, stream, durable string, functions ...string) (*position, error) {
	if p == nil || p.kv == nil {
		return nil, nil
	}
	return p.first(ctx, func(position) bool { return true }, positionKeys(stream, durable, functions...)...)
}

// positionKeys are the keys lookup reads, in its order: durable's
// consumer key, then each function's key; empty names are left out.
func positionKeys(stream, durable string, functions ...string) []string {
	var keys []string
	if durable != "" {
		keys = append(keys, consumerKey(stream, durable))
	}
	for _, f := range functions {
		if f != "" {
			keys = append(keys, functionKey(stream, f))
		}
	}
	return keys
}

// lookupOn is the first position recorded under keys on the stream
// incarnation identity, passing over records of a stream since deleted:
// their sequences mean nothing on this one, and a later key may hold one
// that does.
func (p *positionStore) lookupOn(ctx context.Context, identity string, keys ...string) (*position, error) {
	if p == nil || p.kv == nil {
		return nil, nil
	}
	return p.first(ctx, func(pos position) bool { return pos.StreamIdentity == identity }, keys...)
}

// first is the first position recorded under keys that ok accepts.
func (p *positionStore) first(ctx context.Context, ok func(position) bool, keys ...string) (*position, error) {
	for _, key := range keys {
		entry, err := p.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading recorded position %s: %w", key, err)
		}
		var pos position
		if err := json.Unmarshal(entry.Value(), &pos); err != nil {
			return nil, fmt.Errorf("reading recorded position %s: %w", key, err)
		}
		if ok(pos) {
			return &pos, nil
		}
	}
	return nil, nil
}
