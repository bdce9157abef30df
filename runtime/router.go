package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// identity as its ID and the keyed stream's sequence it expects to follow
// (Nats-Expected-Last-Sequence). So:
//   - a publish that fails stops every one after it in the batch, instead of
//     leaving a gap a retry would fill out of order;
//   - an instance taking over moves the router's consumer back to its ack
//     floor and copies again from there, in order; what the old one had
//     copied is dropped as a duplicate;
//   - an old router still running after its lease ran out is refused as
//     soon as the new one has copied a message.
//
// The chain is by sequence, not by the last message ID: a clustered
// stream checks an expected last ID on every replica when it applies the
// message, and a replica restarted after the keyed stream's last message
// was consumed no longer knows that ID (nats-server v2.15.2 rebuilds it
// from the last message stored), so it fails the write. Sequences survive.
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

// originalSourceHeader keeps, on a routed copy, the input message's own
// Nats-Stream-Source, which the keyed stream would refuse.
const originalSourceHeader = "Jetfn-Original-Stream-Source"

// routedKeyHeader carries a routed copy's key, so status names it without
// reading the payload again.
const routedKeyHeader = "Jetfn-Key"

// routerHeaders are the router's own headers on a copy. A publisher's
// (forged, or a copy's republished) are dropped, so the handler's view is
// only ever what the router set.
var routerHeaders = map[string]bool{routedHeader: true, originalMsgIDHeader: true, originalSourceHeader: true, routedKeyHeader: true}

// routeBatch is how many input messages the router copies per round.
const routeBatch = 256

// router copies a routed keyed function's input into its keyed stream.
type router struct {
	b          *binding // a binding of the router's consumer: its reading and dead letters
	js         jetstream.JetStream
	key        msgkey.Source
	partitions int
	prefix     string
	keyed      string // the keyed stream's name
	lease      *lease
	// bf is the router consumer's backfill while one runs (backfill.go):
	// what a widened subject filter passed over, routed beside the rest.
	bf *binding
	// last is the keyed stream's last sequence as this router knows it:
	// the next copy must find it there.
	last uint64
	// delivered is, per consumer the router reads (its own and its
	// backfill's), the consumer sequence of the last delivery it took;
	// zero after a reset, until the first.
	delivered map[string]uint64
	// careful is set from a takeover until a copy is stored rather than
	// dropped as a duplicate: a duplicate leaves the stream's last
	// sequence where it was, so the copies after it cannot be sent on the
	// assumption that each lands right after the one before. Copies go one
	// at a time meanwhile, each after the last one's acknowledgement.
	careful bool
}

// newRouter binds the router's consumer on the input stream, creating it
// when provisioning. It starts where the function's start says, or just
// after what it had copied into the keyed stream identified by into, or,
// for a function pruned and added back, just after what it had handled
// (keyedresume.go).
func (r *Runtime) newRouter(ctx context.Context, b *binding, input jetstream.Stream, into string, m *manifest.Manifest) (*router, error) {
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
		c, err = r.ensureRouterConsumer(ctx, input, spec, into, m.Digest, b.log)
	}
	if err != nil {
		return nil, fmt.Errorf("router consumer %s: %w", spec.Durable, err)
	}
	rb := b.sibling(spec, b.log.With("router", spec.Durable))
	streamSpec, _ := m.Stream(f.Stream)
	// The handle recreates the input stream and the router's consumer if
	// an operator deletes them, as every function's does: no partition
	// reads the input, so nothing else would.
	// It records the consumer's ack floor, so a consumer recreated after
	// an operator deleted it resumes there instead of copying the whole
	// input again.
	rb.consumer = newConsumerHandle(r.js, spec, streamSpec, m.Digest, !r.opts.noProvision, rb.log, c, input.CachedInfo().Created, r.positions)
	rb.consumer.scope = rb.scope
	rb.consumer.into = into
	bf, err := r.bindBackfill(ctx, rb, input, m)
	if err != nil {
		return nil, err
	}
	return &router{b: rb, bf: bf, delivered: map[string]uint64{}, js: r.js, key: msgkey.Source{Header: f.Key.Header, Field: f.Key.Field}, partitions: f.Partitions,
		prefix: f.RoutedPrefix(), keyed: f.KeyedStreamName(), lease: r.leaseOf(f.RouterLease(), m, rb.log)}, nil
}

// run routes while this instance holds the router's lease, until ctx is
// done. The router's consumer is watched meanwhile, and looked at again
// after every failure.
func (rt *router) run(ctx context.Context) {
	defer rt.lease.use()()
	// The floor at the stop, for a router consumer lost before the function
	// runs again (ensureRouterConsumer); the watch records it meanwhile.
	defer rt.b.consumer.recordNow(context.WithoutCancel(ctx))
	go rt.b.consumer.watch(ctx)
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
				rt.failed(ctx, "taking over the routing", err, time.Second)
				continue
			}
			routing = true
		}
		if err := rt.round(ctx); err != nil {
			rt.failed(ctx, "routing messages to their partitions; copying again from the first not acknowledged", err, 100*time.Millisecond)
			routing = false
		}
	}
}

// failed logs a failure, unless the router is stopping, asks the
// consumer's watch to look (it may be gone) and pauses before the next try.
func (rt *router) failed(ctx context.Context, what string, err error, wait time.Duration) {
	if ctx.Err() != nil {
		return
	}
	rt.b.log.Warn(what, "err", err)
	rt.b.consumer.check()
	pause(ctx, wait)
}

// resume takes up the router's consumer as it is now (refresh), moves it,
// and its backfill's, back to just after their ack floors, so what a previous router pulled and did not
// acknowledge comes again, in order, before anything after it; and learns
// the keyed stream's last sequence, which the first copy must find.
func (rt *router) resume(ctx context.Context) error {
	// A router that stood by has not pulled since it last looked: the
	// input and its consumer may have been made again meanwhile.
	if _, err := rt.b.consumer.refresh(ctx); err != nil {
		return fmt.Errorf("looking up the router's consumer: %w", err)
	}
	for _, b := range []*binding{rt.b, rt.bf} {
		if b == nil {
			continue
		}
		c := b.consumer.get().CachedInfo()
		if _, err := rt.js.ResetConsumerToSequence(ctx, c.Stream, c.Name, 0); err != nil {
			if b == rt.bf && rt.bf.backfillDone(ctx) {
				rt.bf = nil // another instance finished it meanwhile
				continue
			}
			return fmt.Errorf("resetting router consumer %s to its ack floor: %w", c.Name, err)
		}
		delete(rt.delivered, c.Name)
	}
	ks, err := rt.js.Stream(ctx, rt.keyed)
	if err != nil {
		return fmt.Errorf("looking up keyed stream %s: %w", rt.keyed, err)
	}
	rt.last, rt.careful = ks.CachedInfo().State.LastSeq, true
	return nil
}

// copied is one input message on its way to its partition.
type copied struct {
	in     *nats.Msg
	seq    uint64 // its input stream sequence
	future jetstream.PubAckFuture
}

// round copies what the backfill has, while one runs, else what the
// router's consumer has. The backfill goes first: everything it hands over
// was stored before anything the router's consumer delivers, so input
// order is kept. A backfill with nothing left, or gone (the instance that
// routed before finished it), ends.
func (rt *router) round(ctx context.Context) error {
	if rt.bf == nil {
		_, err := rt.routeFrom(ctx, rt.b, true)
		return err
	}
	n, err := rt.routeFrom(ctx, rt.bf, false)
	if n > 0 && err == nil {
		return nil
	}
	if rt.bf.backfillDone(ctx) {
		rt.bf = nil
		return nil
	}
	if err == nil {
		pause(ctx, backfillCheckEvery/10) // what it holds is not acknowledged yet
	}
	return err
}

// routeFrom copies one batch of from's consumer: every message with a key
// to its partition, in order, and dead-letters those without. The input
// messages are acknowledged only up to the first copy the keyed stream
// did not store. It says how many messages it fetched; with wait set, it
// waits up to a second for one when none is there.
func (rt *router) routeFrom(ctx context.Context, from *binding, wait bool) (int, error) {
	msgs, fetchErr := rt.fetch(ctx, from, wait)
	msgs, gapErr := rt.contiguous(from, msgs)
	if len(msgs) == 0 || !rt.lease.holds() {
		// The lease ran out while fetching: whoever routes next resets the
		// consumer and takes them again.
		return len(msgs), errors.Join(fetchErr, gapErr)
	}
	var sent []copied
	for _, m := range msgs {
		c, err := rt.copy(from, m, rt.last+uint64(len(sent)))
		if err != nil {
			return len(msgs), errors.Join(err, rt.settle(sent))
		}
		if c.future == nil {
			continue // dead-lettered, or not the backfill's to copy
		}
		if !rt.careful {
			sent = append(sent, c)
			continue
		}
		if err := rt.settle([]copied{c}); err != nil {
			return len(msgs), err
		}
	}
	// A pull that ended in an error, or deliveries missing between these,
	// may leave messages pending behind the ones copied: the caller resets
	// the consumer so they come next, in order.
	return len(msgs), errors.Join(rt.settle(sent), fetchErr, gapErr)
}

// contiguous keeps msgs up to the first gap in their consumer sequences,
// counting on from the last delivery the router took of from's consumer:
// a gap is a delivery that went elsewhere (an old router still pulling,
// or a reply lost), whose message would come back only after its ack
// wait, behind later ones. The error asks for a reset.
func (rt *router) contiguous(from *binding, msgs []*nats.Msg) ([]*nats.Msg, error) {
	name := from.spec.Durable
	for i, m := range msgs {
		meta, ok := parseAckReply(m.Reply)
		if !ok {
			return msgs[:i], fmt.Errorf("router consumer %s delivered an unreadable ack subject %q", name, m.Reply)
		}
		if last := rt.delivered[name]; last != 0 && meta.consumerSeq != last+1 {
			return msgs[:i], fmt.Errorf("router consumer %s delivered sequence %d after %d: deliveries in between went elsewhere", name, meta.consumerSeq, last)
		}
		rt.delivered[name] = meta.consumerSeq
	}
	return msgs, nil
}

// copy publishes m, which from's consumer delivered, to its partition,
// expecting the keyed stream's last sequence to be last. A message without
// its key is dead-lettered, and one a backfill does not hand over (the
// router's consumer copies it, or did) acknowledged: a copied without a
// future.
func (rt *router) copy(from *binding, m *nats.Msg, last uint64) (copied, error) {
	msg, err := from.toMsg(m)
	if err != nil {
		return copied{}, err
	}
	c := copied{in: m, seq: msg.StreamSequence}
	if from.backfill != nil && !from.backfill.hands(msg.Subject, msg.StreamSequence) {
		return c, reply(rt.js.Conn(), m, ackBody)
	}
	key, kerr := rt.key.Of(msg.Subject, msg.Header, msg.Data)
	if kerr != nil {
		from.deadLetter(m, msg, jetfn.Malformed(kerr), attempt{n: 1})
		return c, nil
	}
	id := msg.StreamIdentity + ":" + strconv.FormatUint(msg.StreamSequence, 10)
	out := nats.NewMsg(rt.prefix + strconv.Itoa(partition.Of([]byte(key), rt.partitions)) + "." + msg.Subject)
	out.Data = msg.Data
	for k, vs := range msg.Header {
		if !strings.HasPrefix(k, "Nats-Expected-") && !strings.HasPrefix(k, "Nats-Batch-") && !routerHeaders[k] {
			out.Header[k] = vs // the server drops those two kinds from a sourced copy too
		}
	}
	if orig := out.Header.Get(jetstream.MsgIDHeader); orig != "" {
		out.Header.Set(originalMsgIDHeader, orig)
	}
	if src := out.Header.Get(streamSourceHeader); src != "" {
		// The input sources another stream; the keyed stream refuses a
		// publish that carries the server's source header.
		out.Header.Del(streamSourceHeader)
		out.Header.Set(originalSourceHeader, src)
	}
	out.Header.Set(jetstream.MsgIDHeader, id)
	out.Header.Set(routedKeyHeader, key)
	out.Header.Set(routedHeader, fmt.Sprintf("%s %d %s %s", msg.Stream, msg.StreamSequence, msg.Subject, msg.StreamIdentity))
	out.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(last, 10))
	c.future, err = rt.js.PublishMsgAsync(out)
	return c, err
}

// settle waits for the copies' acknowledgements in order, acknowledging
// each one's input message and moving last on, until the first copy that
// failed. A duplicate makes the router careful: the copies sent after it
// expected a sequence it did not take, and are refused.
func (rt *router) settle(sent []copied) error {
	deadline := time.NewTimer(settleTimeout) // one for the batch, not one a message
	defer deadline.Stop()
	for _, c := range sent {
		var ack *jetstream.PubAck
		select {
		case ack = <-c.future.Ok():
		case err := <-c.future.Err():
			return fmt.Errorf("copying stream sequence %d: %w", c.seq, err)
		case <-deadline.C:
			return fmt.Errorf("copying stream sequence %d: no acknowledgement in %s", c.seq, settleTimeout)
		}
		if ack.Duplicate {
			rt.careful = true
		} else {
			rt.last, rt.careful = ack.Sequence, false
		}
		if err := reply(rt.js.Conn(), c.in, ackBody); err != nil {
			return err
		}
	}
	return nil
}

// fetch pulls up to routeBatch messages of from's consumer: those waiting
// now, or with wait set and none waiting, the first to arrive within a
// second (pullOnce says why not nats.go's Fetch: the router would neither
// copy nor acknowledge a status reply).
func (rt *router) fetch(ctx context.Context, from *binding, wait bool) ([]*nats.Msg, error) {
	msgs, err := rt.pull(ctx, from, routeBatch, 0)
	if len(msgs) > 0 || err != nil || !wait {
		return msgs, err
	}
	return rt.pull(ctx, from, 1, time.Second)
}

// pull sends one pull request for n messages of from's consumer.
func (rt *router) pull(ctx context.Context, from *binding, n int, wait time.Duration) ([]*nats.Msg, error) {
	return pullOnce(ctx, rt.js.Conn(), from, n, wait)
}

// pullOnce sends one pull request for n messages of from's consumer,
// waiting up to wait for them (none: only those stored now), and reads its
// replies until it ends. It reads the server's replies itself rather than
// through nats.go's Fetch, which takes a status reply for a message with
// an empty body: a message is what came with an ack subject.
func pullOnce(ctx context.Context, nc *nats.Conn, from *binding, n int, wait time.Duration) ([]*nats.Msg, error) {
	sub, err := nc.SubscribeSync(nc.NewInbox())
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	req := fmt.Sprintf(`{"batch":%d,"no_wait":true}`, n)
	if wait > 0 {
		req = fmt.Sprintf(`{"batch":%d,"expires":%d}`, n, wait)
	}
	c := from.consumer.get().CachedInfo()
	subject := jetstream.DefaultAPIPrefix + "CONSUMER.MSG.NEXT." + c.Stream + "." + c.Name
	if err := nc.PublishRequest(subject, sub.Subject, []byte(req)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, wait+pullWait)
	defer cancel()
	var msgs []*nats.Msg
	for len(msgs) < n {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return msgs, fmt.Errorf("pulling from consumer %s: %w", c.Name, err)
		}
		if strings.HasPrefix(m.Reply, "$JS.ACK.") {
			msgs = append(msgs, m)
			continue
		}
		switch code := m.Header.Get("Status"); code {
		case "404", "408": // nothing (more) to deliver
			return msgs, nil
		case "100":
		default:
			return msgs, fmt.Errorf("pulling from consumer %s: %s %s", c.Name, code, m.Header.Get("Description"))
		}
	}
	return msgs, nil
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
