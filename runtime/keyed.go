package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/msgkey"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
)

// A keyed function (manifest keyed.go) is bound as one binding per
// partition: each reads its partition's consumer on the keyed stream, and
// the server hands out no second message of a partition while one is
// unacknowledged (MaxAckPending is the function's perKey), so the messages
// of one key are handled in stream order by one instance at a time, with
// every retry, restart and instance change. The function's own binding
// holds no consumer: it runs the partitions and answers for them.

// ensureKeyedStreams creates or updates the keyed stream of every keyed
// function, after the streams they copy from.
func ensureKeyedStreams(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest, positions *positionStore, log *slog.Logger) error {
	for _, f := range m.Functions {
		if !f.IsKeyed() {
			continue
		}
		spec := m.KeyedStream(f, time.Now())
		if err := refuseRepartition(ctx, js, f, spec); err != nil {
			return err
		}
		if err := resumeSourceAfterPrune(ctx, js, f, &spec, positions, log); err != nil {
			return err
		}
		added, err := subjectsAddedToSource(ctx, js, spec)
		if err != nil {
			return err
		}
		if err := ensureStream(ctx, js, spec); err != nil {
			return err
		}
		for _, subject := range added {
			log.Warn("a subject added to a subject-token keyed function: what its input already stored on it may never be "+
				"handled, since the keyed stream's source takes the subject up from where the source stands",
				"function", f.Name, "subject", subject, "keyed_stream", spec.Name)
		}
	}
	return nil
}

// subjectsAddedToSource is the subjects spec adds to an existing
// subject-token keyed stream's source that no subject of its source
// covered. The server takes such a subject up from where the source
// stands, not from the subject's first message, so what the input stored on
// it before may never be copied, never handled; copied late, it would run
// after later messages of its keys. jetfn cannot hand it over in key order,
// so it says so: a warning when it applies the change, a line in
// `check --server` before.
func subjectsAddedToSource(ctx context.Context, js jetstream.JetStream, spec manifest.StreamSpec) ([]string, error) {
	if spec.Source == nil {
		return nil, nil
	}
	ks, err := js.Stream(ctx, spec.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil // a new keyed stream starts where the manifest's start says
	}
	if err != nil {
		return nil, fmt.Errorf("looking up keyed stream %s: %w", spec.Name, err)
	}
	sources := ks.CachedInfo().Config.Sources
	if len(sources) == 0 {
		return nil, nil
	}
	var added []string
	for _, t := range spec.Source.Transforms {
		covered := slices.ContainsFunc(sources[0].SubjectTransforms, func(had jetstream.SubjectTransformConfig) bool {
			return manifest.SubjectCovered(t.Source, had.Source)
		})
		if !covered {
			added = append(added, t.Source)
		}
	}
	return added, nil
}

// refuseRepartition refuses to change how a keyed stream maps keys to
// partitions while it holds messages: a key's waiting messages would stay
// in its old partition while its new ones went to another, and the two
// would run side by side, out of order.
func refuseRepartition(ctx context.Context, js jetstream.JetStream, f manifest.FunctionSpec, spec manifest.StreamSpec) error {
	s, err := js.Stream(ctx, spec.Name)
	if err != nil {
		return nil // none yet, or ensureStream says what is wrong
	}
	info := s.CachedInfo()
	if info.State.Msgs == 0 {
		return nil
	}
	have, err := partitionsOn(ctx, s, f)
	if err != nil {
		return err
	}
	// No partition consumer left (an operator deleted them) says nothing
	// of how the keys were hashed: the sources still do, for a token key.
	if (have == 0 || have == f.Partitions) && slices.EqualFunc(info.Config.Sources, streamConfig(spec).Sources, sameTransforms) {
		return nil
	}
	return fmt.Errorf("%w: keyed stream %s holds %d messages not yet handled; changing the function's partitions or "+
		"subjects now would put new messages of a key in another partition than its waiting ones, out of order. "+
		"Deploy the change once the stream is empty (`nats stream info %s`)", ErrServerRefused, spec.Name, info.State.Msgs, spec.Name)
}

// partitionsOn counts the function's partition consumers on its keyed
// stream: how many partitions its keys were hashed to so far (a routed
// keyed stream's config does not say).
func partitionsOn(ctx context.Context, s jetstream.Stream, f manifest.FunctionSpec) (int, error) {
	n := 0
	names := s.ConsumerNames(ctx)
	for name := range names.Name() {
		if _, ok := partitionIndex(name, f); ok {
			n++
		}
	}
	if err := names.Err(); err != nil {
		return 0, fmt.Errorf("listing the consumers of keyed stream %s: %w", s.CachedInfo().Config.Name, err)
	}
	return n, nil
}

// partitionIndex is the partition whose consumer is named name
// (f.PartitionDurable), if it is one of f's.
func partitionIndex(name string, f manifest.FunctionSpec) (int, bool) {
	rest, ok := strings.CutPrefix(name, f.Durable+"-p")
	i, err := strconv.Atoi(rest)
	return i, ok && len(rest) == 3 && err == nil
}

func sameTransforms(a, b *jetstream.StreamSource) bool {
	return a.Name == b.Name && slices.Equal(a.SubjectTransforms, b.SubjectTransforms)
}

// sourcesOf is the keyed stream's source: the input stream, through the
// partition transforms.
func sourcesOf(src *manifest.SourceSpec) []*jetstream.StreamSource {
	if src == nil {
		return nil
	}
	ss := &jetstream.StreamSource{Name: src.Stream, OptStartTime: src.StartTime, OptStartSeq: src.StartSeq}
	for _, t := range src.Transforms {
		ss.SubjectTransforms = append(ss.SubjectTransforms, jetstream.SubjectTransformConfig{Source: t.Source, Destination: t.Destination})
	}
	return []*jetstream.StreamSource{ss}
}

// keepSourceStart gives want's sources the start the server's have: where
// a source started is decided once, when the keyed stream is made.
func keepSourceStart(have, want []*jetstream.StreamSource) {
	for _, w := range want {
		for _, h := range have {
			if h.Name == w.Name {
				w.OptStartTime, w.OptStartSeq = h.OptStartTime, h.OptStartSeq
			}
		}
	}
}

// connectParts binds every partition of a keyed function to its consumer
// on the keyed stream, creating the consumers when provisioning.
func (r *Runtime) connectParts(ctx context.Context, b *binding, input jetstream.Stream, m *manifest.Manifest) error {
	name := b.spec.KeyedStreamName()
	ks, err := r.js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("looking up keyed stream %s: %w", name, err)
	}
	streamSpec := m.KeyedStream(b.spec, time.Now())
	parts := make([]*binding, b.spec.Partitions)
	for i := range parts {
		spec := b.spec.Partition(i)
		p := b.sibling(spec, b.log.With("partition", i))
		p.fromSource = true
		c, err := r.partitionConsumer(ctx, ks, spec, m.Digest, p)
		if err != nil {
			return err
		}
		p.consumer = newConsumerHandle(r.js, spec, streamSpec, m.Digest, !r.opts.noProvision, p.log, c, ks.CachedInfo().Created, nil)
		p.consumer.onAckWait = p.followServerAckWait
		parts[i] = p
	}
	b.parts = parts
	if b.spec.IsRouted() {
		rt, err := r.newRouter(ctx, b, input, StreamIdentity(ks.CachedInfo().Created), m)
		if err != nil {
			return err
		}
		b.router = rt
	} else if !r.opts.noProvision {
		inputSpec, _ := m.Stream(b.spec.Stream)
		b.keepInput = r.inputKeeper(inputSpec, b.log)
	}
	return nil
}

// keepInputStream runs keepInput when the server announces that the input
// stream was deleted, and every consumerCheckEvery in case the
// announcement was missed (a reconnect), until ctx is done.
func (b *binding) keepInputStream(ctx context.Context) {
	deleted := make(chan struct{}, 1)
	sub, err := b.js.Conn().Subscribe(streamDeletedAdvisory+b.spec.Stream, func(*nats.Msg) {
		select {
		case deleted <- struct{}{}:
		default:
		}
	})
	if err != nil {
		b.log.Warn("listening for the input stream's deletion; looking every "+consumerCheckEvery.String()+" only", "err", err)
	} else {
		defer func() { _ = sub.Unsubscribe() }()
	}
	everyOrKicked(ctx, consumerCheckEvery, deleted, b.keepInput)
}

// streamDeletedAdvisory is the subject prefix of the server's announcement
// that a stream was deleted; the stream's name follows.
const streamDeletedAdvisory = "$JS.EVENT.ADVISORY.STREAM.DELETED."

// inputKeeper recreates a token-keyed function's input stream when an
// operator deleted it, as every other function's consumer handle does for
// the stream it reads: here no consumer of the function reads the input
// (its keyed stream sources it), so no failed pull notices, and the keeper
// listens for the server's announcement instead. The keyed stream's source
// sees the new stream's identity and starts again from its first message.
func (r *Runtime) inputKeeper(spec manifest.StreamSpec, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
		defer cancel()
		if _, err := r.js.Stream(ctx, spec.Name); !errors.Is(err, jetstream.ErrStreamNotFound) {
			return
		}
		if err := recreateStream(ctx, r.js, spec); err != nil {
			log.Error("recreating a keyed function's deleted input stream", "stream", spec.Name, "err", err)
			return
		}
		log.Warn("recreated a keyed function's deleted input stream from the manifest", "stream", spec.Name)
	}
}

// partitionConsumer is partition spec's consumer: created or updated when
// provisioning, else looked up. It keeps no recorded position: the keyed
// stream deletes what it acknowledged, so a consumer made again starts at
// the stream's first message and misses nothing.
func (r *Runtime) partitionConsumer(ctx context.Context, ks jetstream.Stream, spec manifest.FunctionSpec, digest string,
	p *binding) (jetstream.Consumer, error) {
	if !r.opts.noProvision {
		return ensureConsumer(ctx, ks, spec, digest, p.log, nil)
	}
	c, err := ks.Consumer(ctx, spec.Durable)
	if err != nil {
		return nil, fmt.Errorf("looking up consumer %s (provisioning is off): %w", spec.Durable, err)
	}
	if err := checkUnlimitedDeliveries(c, spec); err != nil {
		return nil, err
	}
	return c, checkPendingBound(c, spec)
}

// runParts runs every partition until ctx is done and each has drained.
func (b *binding) runParts(ctx context.Context, drainTimeout time.Duration) {
	var wg sync.WaitGroup
	if b.router != nil {
		wg.Go(func() { b.router.run(ctx) })
	}
	if b.keepInput != nil {
		wg.Go(func() { b.keepInputStream(ctx) })
	}
	if b.debouncer != nil {
		wg.Go(func() { b.debouncer.run(ctx) })
	}
	for _, p := range b.parts {
		wg.Go(func() { p.run(ctx, drainTimeout) })
	}
	wg.Wait()
}

// consumers are the consumer handles the binding pulls from: its own, or
// its partitions'.
func (b *binding) consumers() []*consumerHandle {
	if b.parts == nil {
		return []*consumerHandle{b.consumer}
	}
	hs := make([]*consumerHandle, len(b.parts))
	for i, p := range b.parts {
		hs[i] = p.consumer
	}
	return hs
}

// consumerErr is the first missing consumer of the binding's, naming its
// partition when it has several.
func (b *binding) consumerErr() error {
	for i, h := range b.consumers() {
		if err := h.err(); err != nil {
			if b.parts != nil {
				return fmt.Errorf("partition %d: %w", i, err)
			}
			return err
		}
	}
	return nil
}

// sourced is what a keyed stream's copy says of the message it copies,
// read from its Nats-Stream-Source header, which nats-server writes as
// "<stream> <seq> <filters> <transforms> <subject>[ <identity>]".
type sourced struct {
	stream, subject, identity string
	seq                       uint64
}

// errNotSourced is a keyed stream message without a readable origin: one
// published to the keyed stream directly, not copied by the server.
var errNotSourced = errors.New("the message has no Nats-Stream-Source header naming the input stream's message; " +
	"only the server's copies belong in a keyed stream")

func parseSourced(h string) (sourced, error) { return parseOrigin(h, 4) }

// parseOrigin reads "<stream> <seq> … <subject>[ <identity>]", the subject
// being field subjectAt: the server's Nats-Stream-Source (4) and the
// router's header (2) differ only there.
func parseOrigin(h string, subjectAt int) (sourced, error) {
	fields := strings.Split(h, " ")
	if len(fields) <= subjectAt {
		return sourced{}, fmt.Errorf("%w (got %q)", errNotSourced, h)
	}
	seq, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil || seq == 0 {
		return sourced{}, fmt.Errorf("%w (got %q)", errNotSourced, h)
	}
	s := sourced{stream: fields[0], seq: seq, subject: fields[subjectAt]}
	if len(fields) > subjectAt+1 {
		s.identity = fields[subjectAt+1]
	}
	return s, nil
}

// originOf reads where a keyed stream's message was copied from (the
// router's header, or the server's Nats-Stream-Source), and the headers
// the handler sees: for a routed copy, the input message's again, with
// the publisher's Nats-Msg-Id (which the router's own ID replaced) and the
// input's own Nats-Stream-Source back. h is left as it is: the delivery is
// read more than once.
func originOf(h nats.Header) (sourced, nats.Header, error) {
	v := h.Get(routedHeader)
	if v == "" {
		src, err := parseSourced(h.Get(streamSourceHeader))
		return src, h, err
	}
	src, err := parseRouted(v)
	if err != nil {
		return sourced{}, nil, err
	}
	view := maps.Clone(h)
	delete(view, jetstream.MsgIDHeader)
	delete(view, schedulerHeader) // a debounced run's, which the server fired (debounce.go)
	delete(view, scheduleNextHeader)
	for k := range view {
		if strings.HasPrefix(k, "Nats-Batch-") { // a debounced run's schedule was stored in a batch
			delete(view, k)
		}
	}
	for saved, header := range map[string]string{originalMsgIDHeader: jetstream.MsgIDHeader, originalSourceHeader: streamSourceHeader} {
		if orig := h.Get(saved); orig != "" {
			view.Set(header, orig)
			delete(view, saved)
		}
	}
	return src, view, nil
}

// streamSourceHeader is the header nats-server puts on a sourced copy.
const streamSourceHeader = "Nats-Stream-Source"

// keyHead is the message a partition binding handles or retries: its
// key, and whether its last run failed. A partition holds its message
// until it is settled for good, so this is the head of its keys' line.
type keyHead struct {
	key       string
	keyedSeq  uint64 // in the keyed stream, to tell when another instance settled it
	stored    time.Time
	delivered uint64
	lastErr   string
	since     time.Time // when its first failure was seen; zero while none
}

// noteHead records the message m a partition starts handling.
func (b *binding) noteHead(m *nats.Msg, msg jetfn.Msg) {
	if !b.fromSource {
		return
	}
	meta, _ := parseOwnAckReply(m.Reply, b.ackPrefix, b.spec.Stream)
	h := &keyHead{key: b.keyOf(m, msg), keyedSeq: meta.streamSeq, stored: msg.Published, delivered: msg.NumDelivered}
	if old := b.head.Load(); old != nil && old.keyedSeq == h.keyedSeq {
		h.lastErr, h.since = old.lastErr, old.since
	}
	b.head.Store(h)
}

// keyOf is the key of a partition's message m (msg, the handler's view):
// the router wrote it on its copy; a subject token is read again.
func (b *binding) keyOf(m *nats.Msg, msg jetfn.Msg) string {
	if key := m.Header.Get(routedKeyHeader); key != "" {
		return key
	}
	key, _ := msgkey.Source{Token: b.spec.Key.Token}.Of(msg.Subject, nil, nil)
	return key
}

// noteFailure marks the head as failed: its key is stuck until a run
// succeeds or it is dead-lettered.
func (b *binding) noteFailure(herr error) {
	if h := b.head.Load(); h != nil && b.fromSource {
		failed := *h
		failed.lastErr = herr.Error()
		if failed.since.IsZero() {
			failed.since = time.Now()
		}
		b.head.CompareAndSwap(h, &failed)
	}
}

// settledHead forgets the head once it is settled for good.
func (b *binding) settledHead() {
	if b.fromSource {
		b.head.Store(nil)
	}
}

// keyStatus adds up the partitions' consumers and reports the keys this
// instance holds: one consumer lookup per partition.
func (b *binding) keyStatus(ctx context.Context, s *wire.Stats) {
	s.Partitions, s.PerKey = b.spec.Partitions, b.spec.PerKey()
	var oldest *keyHead
	for i, p := range b.parts {
		info, err := p.consumer.get().Info(ctx)
		if err != nil {
			if last := p.lastPending.Load(); last != nil {
				// As status does: the last figures, not zeros, in a failover.
				s.NumPending += last.pending
				s.NumAckPending += last.ackPending
				s.PendingStale = true
			}
			continue
		}
		p.lastPending.Store(&consumerPending{pending: info.NumPending, ackPending: info.NumAckPending})
		s.NumPending += info.NumPending
		s.NumAckPending += info.NumAckPending
		notePause(s, info)
		if info.NumAckPending > 0 {
			s.KeysActive++
		}
		if b.spec.IsKeyed() && info.NumAckPending >= s.PerKey {
			s.HeldByKey += info.NumPending
		}
		h := p.head.Load()
		if h == nil || info.AckFloor.Stream >= h.keyedSeq {
			p.head.CompareAndSwap(h, nil) // settled, here or by another instance
			continue
		}
		if oldest == nil || h.stored.Before(oldest.stored) {
			oldest = h
		}
		if !h.since.IsZero() {
			s.StuckKeys = append(s.StuckKeys, wire.StuckKey{Key: h.key, Partition: i, Deliveries: h.delivered,
				LastError: h.lastErr, Since: h.since})
		}
	}
	if b.router != nil {
		b.router.status(ctx, s)
	}
	if b.debouncer != nil {
		b.debouncer.status(ctx, s)
	}
	slices.SortFunc(s.StuckKeys, func(a, b wire.StuckKey) int { return a.Since.Compare(b.Since) })
	if oldest != nil {
		s.OldestKey, s.OldestKeyWaitSeconds = oldest.key, time.Since(oldest.stored).Seconds()
	}
}
