// Package jetfntest unit-tests a function without a server: Deps whose
// Publisher records every output as the runtime would send it, and helpers
// to build a Msg. It imports the contract and the manifest's subject rules
// only, so a function's unit tests build without NATS.
//
// Anything that talks to NATS or Mongo is still tested against the real
// embedded servers (runtime/runtimetest).
package jetfntest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
)

// Output is one recorded publish.
type Output struct {
	Subject string
	Data    []byte
	// Key is what the function passed; MsgID is the Nats-Msg-Id the
	// runtime would send for it ("" for jetfn.NoDedup).
	Key   string
	MsgID string
	// At is when a PublishAt asked for it to be published; zero for
	// Publish.
	At time.Time
}

// Publisher is a jetfn.Publisher that records instead of publishing. It
// applies the runtime Publisher's rules: an empty key is refused
// (jetfn.ErrNoOutputKey) and, when Declared is set, so is a subject outside
// it (jetfn.ErrUndeclaredOutput), both as permanent failures.
type Publisher struct {
	// Function scopes message IDs, as the runtime does.
	Function string
	// Declared are the manifest's output subjects (patterns); empty allows
	// any subject.
	Declared []string
	// Delayed are those declared `delayed: true`; empty allows PublishAt
	// to any subject Declared allows.
	Delayed []string
	// Err, when set, is returned by every Publish instead of recording, to
	// test how a handler meets a publish failure.
	Err error

	mu      sync.Mutex
	outputs []Output
}

var _ jetfn.Publisher = (*Publisher)(nil)

// Publish records one output, or refuses it as the runtime would.
func (p *Publisher) Publish(_ context.Context, subject string, data []byte, key string) error {
	return p.record(subject, data, key, time.Time{})
}

// PublishAt records one delayed output, or refuses it as the runtime
// would: also a subject outside Delayed (when set) and jetfn.NoDedup, with
// jetfn.ErrUndelayedOutput.
func (p *Publisher) PublishAt(_ context.Context, subject string, data []byte, key string, at time.Time) error {
	if p.Err == nil && (len(p.Delayed) > 0 && !manifest.CoveredByAny(subject, p.Delayed) || key == jetfn.NoDedup) {
		return jetfn.Permanent(fmt.Errorf("%w: %s (key %q)", jetfn.ErrUndelayedOutput, subject, key))
	}
	return p.record(subject, data, key, at)
}

func (p *Publisher) record(subject string, data []byte, key string, at time.Time) error {
	if p.Err != nil {
		return p.Err
	}
	if len(p.Declared) > 0 && !manifest.CoveredByAny(subject, p.Declared) {
		return jetfn.Permanent(fmt.Errorf("%w: function %s publishes only to %v (manifest outputs), not %s",
			jetfn.ErrUndeclaredOutput, p.Function, p.Declared, subject))
	}
	msgID, err := jetfn.OutputMsgID(p.Function, subject, key)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outputs = append(p.outputs, Output{Subject: subject, Data: slices.Clone(data), Key: key, MsgID: msgID, At: at})
	return nil
}

// Outputs is every recorded output, in publish order.
func (p *Publisher) Outputs() []Output {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.outputs)
}

// Deps is what the runtime would give function's constructor, with config
// as its manifest `config:` block (YAML; "" for none), a recording
// Publisher, a logger that discards, and no Mongo.
func Deps(t testing.TB, function, config string) (jetfn.Deps, *Publisher) {
	t.Helper()
	block, err := jetfn.ConfigFromYAML(config)
	if err != nil {
		t.Fatalf("config block: %v", err)
	}
	pub := &Publisher{Function: function}
	return jetfn.Deps{Logger: slog.New(slog.DiscardHandler), Config: block, Publisher: pub}, pub
}

// Msg is a first delivery of data on subject, as stream message seq of
// stream, the way a handler receives it.
func Msg(stream string, seq uint64, subject string, data []byte) jetfn.Msg {
	return jetfn.Msg{Stream: stream, StreamSequence: seq, Subject: subject, Data: data, NumDelivered: 1, Header: jetfn.Header{}}
}

// MsgID is jetfn.OutputMsgID for a key that must be valid, for tests that
// compare the IDs a function's outputs carry.
func MsgID(function, subject, key string) string {
	id, err := jetfn.OutputMsgID(function, subject, key)
	if err != nil {
		panic(err)
	}
	return id
}
