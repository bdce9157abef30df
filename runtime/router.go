package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/msgkey"
	"github.com/jetfn/jetfn/internal/partition"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
)

// A keyed function whose key is in a header or a payload field has its
// messages copied into its keyed stream by jetfn's router, since the
// server can hash only subject tokens. One instance routes at a time (a
// lease, not a pinned client, for the reasons in design/per-key-ordering.md):
// it reads the input in order through its own consumer and publishes each
// message to <prefix><partition>.<subject>, with the input message's
// identity as its ID and the previous copy's ID as the one the stream must
// hold last (Nats-Expected-Last-Msg-Id). So:
//   - a publish that fails stops every one after it in the batch, instead of
//     leaving a gap a retry would fill out of order;
//   - an instance taking over moves the router's consumer back to its ack
//     floor and copies again from there, in order; what the old one had
//     copied is dropped as a duplicate;
//   - an old router still running after its lease ran out is refused by the
//     expected ID as soon as the new one has copied a message.
//
// A message without its key is dead-lettered at once with the reason,
// never retried, never given a key of its own.

// routedHeader carries, on a routed copy, the input message's origin as
// "<stream> <seq> <subject> <identity>"; sourcedMsg reads it as it reads
// the server's Nats-Stream-Source.
const routedHeader = "Jetfn-Routed-From"

// originalMsgIDHeader keeps the publisher's Nats-Msg-Id of a routed copy,
// whose own ID is the router's.
const originalMsgIDHeader = "Jetfn-Original-Msg-Id"

// routedKeyHeader carries a routed copy's key, so status names it without
// reading the payload again.
const routedKeyHeader = "Jetfn-Key"

// routeBatch is how many input messages the router copies per round.
const routeBatch = 256

// router copies a routed keyed function's input into its keyed stream.
type router struct {
	b          *binding // a binding of the router's consumer: its reading and dead letters
	js         jetstream.JetStream
	key        msgkey.Source
	partitions int
	prefix     string
	lease      *lease
	// lastID is the ID of the last copy this router published; empty
	// after a takeover, when it is not known.
	lastID string
}

// newRouter binds the router's consumer on the input stream, creating it
// when provisioning. It starts where the function's start says.
func (r *Runtime) newRouter(ctx context.Context, b *binding, input jetstream.Stream, m *manifest.Manifest) (*router, error) {
	f := b.spec
	spec := f
	spec.Durable, spec.Concurrency, spec.MaxAckPending = f.RouterDurable(), 1, routeBatch
	var c jetstream.Consumer
	var err error
	if r.opts.noProvision {
		if c, err = input.Consumer(ctx, spec.Durable); err == nil {
			err = checkUnlimitedDeliveries(c, spec)
		}
	} else {
		c, err = ensureConsumer(ctx, input, spec, m.Digest, b.log, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("router consumer %s: %w", spec.Durable, err)
	}
	rb := b.sibling(spec, b.log.With("router", spec.Durable))
	streamSpec, _ := m.Stream(f.Stream)
	rb.consumer = newConsumerHandle(r.js, spec, streamSpec, m.Digest, false, rb.log, c, input.CachedInfo().Created, nil)
	return &router{b: rb, js: r.js, key: msgkey.Source{Header: f.Key.Header, Field: f.Key.Field}, partitions: f.Partitions,
		prefix: f.RoutedPrefix(), lease: r.leaseOf(f.RouterLease(), m, rb.log)}, nil
}

// run routes while this instance holds the router's lease, until ctx is
// done.
func (rt *router) run(ctx context.Context) {
	defer rt.lease.use()()
	routing := false
	for ctx.Err() == nil {
		if !rt.lease.holds() {
			routing = false // another instance may route meanwhile: take over afresh
			rt.lease.await(ctx)
			if ctx.Err() != nil {
				return
			}
		}
		if !routing {
			if err := rt.resume(ctx); err != nil {
				rt.b.log.Warn("taking over the routing", "err", err)
				pause(ctx, time.Second)
				continue
			}
			routing = true
		}
		if err := rt.round(ctx); err != nil {
			rt.b.log.Warn("routing messages to their partitions; copying again from the first not acknowledged", "err", err)
			routing = false
			pause(ctx, 100*time.Millisecond)
		}
	}
}

// resume moves the router's consumer back to just after its ack floor, so
// what a previous router pulled and did not acknowledge comes again, in
// order, before anything after it.
func (rt *router) resume(ctx context.Context) error {
	c := rt.b.consumer.get().CachedInfo()
	if _, err := rt.js.ResetConsumerToSequence(ctx, c.Stream, c.Name, 0); err != nil {
		return fmt.Errorf("resetting router consumer %s to its ack floor: %w", c.Name, err)
	}
	rt.lastID = ""
	return nil
}

// round copies one batch: every message with a key to its partition, in
// order, and dead-letters those without. The input messages are
// acknowledged only up to the first copy the keyed stream did not store.
func (rt *router) round(ctx context.Context) error {
	batch, err := rt.b.consumer.get().Fetch(routeBatch, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return err
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && len(msgs) == 0 {
		return err
	}
	if len(msgs) == 0 || !rt.lease.holds() {
		return nil // the lease ran out while fetching: whoever routes next takes them again
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		if futures[i], err = rt.copy(ctx, m); err != nil {
			return rt.settle(msgs[:i], futures[:i], err)
		}
	}
	return rt.settle(msgs, futures, nil)
}

// copy publishes m to its partition, or dead-letters it when it has no
// key (a nil future).
func (rt *router) copy(ctx context.Context, m jetstream.Msg) (jetstream.PubAckFuture, error) {
	raw := natsMsgOf(m)
	msg, err := rt.b.toMsg(raw)
	if err != nil {
		return nil, err
	}
	key, kerr := rt.key.Of(msg.Subject, msg.Header, msg.Data)
	if kerr != nil {
		rt.b.deadLetter(raw, msg, jetfn.Malformed(kerr), attempt{n: 1})
		return nil, nil
	}
	id := msg.StreamIdentity + ":" + strconv.FormatUint(msg.StreamSequence, 10)
	out := nats.NewMsg(rt.prefix + strconv.Itoa(partition.Of([]byte(key), rt.partitions)) + "." + msg.Subject)
	out.Data = msg.Data
	for k, vs := range msg.Header {
		out.Header[k] = vs
	}
	if orig := out.Header.Get(jetstream.MsgIDHeader); orig != "" {
		out.Header.Set(originalMsgIDHeader, orig)
	}
	out.Header.Set(jetstream.MsgIDHeader, id)
	out.Header.Set(routedKeyHeader, key)
	out.Header.Set(routedHeader, fmt.Sprintf("%s %d %s %s", msg.Stream, msg.StreamSequence, msg.Subject, msg.StreamIdentity))
	if rt.lastID != "" {
		out.Header.Set(jetstream.ExpectedLastMsgIDHeader, rt.lastID)
	}
	f, err := rt.js.PublishMsgAsync(out)
	if err != nil {
		return nil, err
	}
	rt.lastID = id
	return f, nil
}

// settle waits for the copies' acknowledgements and acknowledges the input
// messages in order, up to the first copy that failed.
func (rt *router) settle(msgs []jetstream.Msg, futures []jetstream.PubAckFuture, failed error) error {
	deadline := time.NewTimer(settleTimeout) // one for the batch, not one a message
	defer deadline.Stop()
	for i, f := range futures {
		if f != nil {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return errors.Join(fmt.Errorf("copying stream sequence %s: %w", seqOf(msgs[i]), err), failed)
			case <-deadline.C:
				return errors.Join(fmt.Errorf("copying stream sequence %s: no acknowledgement in %s", seqOf(msgs[i]), settleTimeout), failed)
			}
			if err := msgs[i].Ack(); err != nil {
				return err
			}
		}
	}
	return failed
}

func seqOf(m jetstream.Msg) string {
	if meta, err := m.Metadata(); err == nil {
		return strconv.FormatUint(meta.Sequence.Stream, 10)
	}
	return "?"
}

// natsMsgOf is the core message behind a fetched one, which toMsg and the
// dead letter read.
func natsMsgOf(m jetstream.Msg) *nats.Msg {
	return &nats.Msg{Subject: m.Subject(), Reply: m.Reply(), Header: m.Headers(), Data: m.Data()}
}

// parseRouted reads a routed copy's origin (routedHeader).
func parseRouted(h string) (sourced, error) { return parseOrigin(h, 2) }

// status adds the router's role and the input messages it has not copied
// yet: those wait for the function as surely as the partitions' pending.
func (rt *router) status(ctx context.Context, s *wire.Stats) {
	s.Router = "standby"
	if rt.lease.holds() {
		s.Router = "active"
	}
	if info, err := rt.b.consumer.get().Info(ctx); err == nil {
		s.RouterPending = info.NumPending + uint64(info.NumAckPending)
		s.NumPending += s.RouterPending
	}
}
