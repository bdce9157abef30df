package runtime

// A debounced function (manifest/debounce.go) is bound like a keyed one:
// the function's binding holds no consumer of its own; its parts, one per
// partition of the debounce stream's due runs, run the handler on them,
// one run at a time each, and its debouncer turns each input message into
// a receipt and a schedule of its key, one message at a time across every
// instance (the debouncer's consumer has one message pending at most).
//
// The receipt and the schedule go in one atomic batch. The receipt's
// message ID is the input message's identity, so a redelivered input (its
// debouncer died before the ack) is refused whole as a duplicate: a burst
// that already ran does not run again, and one that waits is not pushed
// later. The schedule carries the input as the router's copy does
// (routedHeader), so the handler sees the input message, its IDs and its
// outputs' IDs.
//
// The server fires a schedule by storing its message on the key's run
// subject, and that store purges the key's wait subject. A schedule stored
// in the moment between (a new message of the key, in the instant its
// burst ends) is purged with it. So before the handler runs a due run, the
// runner compares it with the key's last receipt: a newer input whose
// schedule is gone is scheduled again (design/debounce.md).

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
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

// debounceRetryWait spaces the debouncer's tries of one message's batch;
// the message stays in hand meanwhile (kept alive), so no later message of
// its key overtakes it.
const debounceRetryWait = time.Second

// ttlHeader is the server's per-message time to live (a receipt's).
const ttlHeader = "Nats-TTL"

// debouncer turns a debounced function's input into receipts and
// schedules.
type debouncer struct {
	b    *binding // a binding of the debouncer's consumer: its reading and dead letters
	bf   *binding // its backfill's, while a widened subject's stored messages are handed over
	js   jetstream.JetStream
	spec manifest.FunctionSpec
	key  msgkey.Source
}

// ensureDebounceStreams creates or updates the debounce stream of every
// debounced function, after refusing the changes that would lose or
// double messages (refuseDebounceChange).
func ensureDebounceStreams(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest) error {
	for _, f := range m.Functions {
		if err := refuseDebounceChange(ctx, js, f); err != nil {
			return err
		}
		if !f.IsDebounced() {
			continue
		}
		if err := ensureStream(ctx, js, m.DebounceStream(f)); err != nil {
			return err
		}
	}
	return nil
}

// pruneDebouncePartitions removes, for every debounced function of m, the
// consumers of partitions beyond its own: a deploy with fewer partitions
// left them, reading nothing, and their count would make every later
// deploy look like a change of partitions. It runs when no binding of the
// old partitions runs here: at start, and after a deploy retired them.
func (r *Runtime) pruneDebouncePartitions(ctx context.Context, m *manifest.Manifest) {
	if r.opts.noProvision {
		return
	}
	for _, f := range m.Functions {
		if f.IsDebounced() {
			if err := pruneExtraPartitions(ctx, r.js, f); err != nil {
				r.opts.log.Warn("removing the consumers of partitions no longer in use", "function", f.Name, "err", err)
			}
		}
	}
}

// refuseDebounceChange refuses a deploy that would lose or double f's
// messages: turning debounce on while the function's own consumer exists
// on its input, or off while its debouncer's does (the new consumer would
// start from the manifest's start, not where the other got to), and
// changing a debounced function's partitions while a schedule or a run
// waits (each names its key's partition, which a new count would not
// read).
func refuseDebounceChange(ctx context.Context, js jetstream.JetStream, f manifest.FunctionSpec) error {
	other, mode := f.Durable, "on"
	if !f.IsDebounced() {
		other, mode = f.DebouncerDurable(), "off"
	}
	_, err := js.Consumer(ctx, f.Stream, other)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("looking up consumer %s on %s: %w", other, f.Stream, err)
	}
	if err == nil {
		return fmt.Errorf("%w: turning debounce %s while consumer %s on %s exists would handle the input again from the manifest's start: "+
			"stop the publishers, wait until nothing is pending (`jetfn status`), remove consumer %s (`nats consumer rm %s %s`), and deploy with start: new",
			ErrServerRefused, mode, other, f.Stream, other, f.Stream, other)
	}
	if !f.IsDebounced() {
		return nil
	}
	ds, err := js.Stream(ctx, f.DebounceStreamName())
	if err != nil {
		return nil // none yet, or ensureStream says what is wrong
	}
	have, err := partitionsOn(ctx, ds, f)
	if err != nil || have == 0 || have == f.Partitions {
		return err
	}
	for _, kind := range []string{manifest.DebounceWait, manifest.DebounceRun} {
		_, err := ds.GetLastMsgForSubject(ctx, f.DebounceSubject(kind, ">"))
		if err == nil {
			return fmt.Errorf("%w: debounce stream %s holds schedules or runs waiting in %d partitions; changing the function's partitions now "+
				"would leave them unread. Deploy the change once nothing waits (`jetfn status`)", ErrServerRefused, ds.CachedInfo().Config.Name, have)
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("looking for waiting runs in debounce stream %s: %w", f.DebounceStreamName(), err)
		}
	}
	return nil
}

// pruneExtraPartitions removes the consumers of partitions beyond f's on
// its debounce stream.
func pruneExtraPartitions(ctx context.Context, js jetstream.JetStream, f manifest.FunctionSpec) error {
	ds, err := js.Stream(ctx, f.DebounceStreamName())
	if err != nil {
		return fmt.Errorf("looking up debounce stream %s: %w", f.DebounceStreamName(), err)
	}
	names := ds.ConsumerNames(ctx)
	var extra []string
	for name := range names.Name() {
		if i, ok := partitionIndex(name, f); ok && i >= f.Partitions {
			extra = append(extra, name)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("listing the consumers of debounce stream %s: %w", f.DebounceStreamName(), err)
	}
	for _, name := range extra {
		if err := ds.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("removing consumer %s of a partition no longer in use: %w", name, err)
		}
	}
	return nil
}

// connectDebounced binds the runners of a debounced function, one per
// partition of its due runs, to their consumers on the debounce stream,
// and its debouncer to its consumer on the input, creating them when
// provisioning.
func (r *Runtime) connectDebounced(ctx context.Context, b *binding, input jetstream.Stream, m *manifest.Manifest) error {
	f := b.spec
	ds, err := r.js.Stream(ctx, f.DebounceStreamName())
	if err != nil {
		return fmt.Errorf("looking up debounce stream %s: %w", f.DebounceStreamName(), err)
	}
	if r.opts.noProvision {
		if err := checkDebounceStream(ds.CachedInfo().Config); err != nil {
			return err
		}
	}
	guard := &debounceGuard{js: r.js, spec: f, stream: ds}
	parts := make([]*binding, f.Partitions)
	for i := range parts {
		spec := f.DebouncedPartition(i)
		runner := b.sibling(spec, b.log.With("debounce_stream", ds.CachedInfo().Config.Name, "partition", i))
		runner.fromSource = true
		c, err := r.partitionConsumer(ctx, ds, spec, m.Digest, runner)
		if err != nil {
			return err
		}
		runner.consumer = newConsumerHandle(r.js, spec, m.DebounceStream(f), m.Digest, !r.opts.noProvision, runner.log, c, ds.CachedInfo().Created, nil)
		runner.consumer.onAckWait = runner.followServerAckWait
		runner.beforeRun = guard.rescheduleNewer
		parts[i] = runner
	}
	b.parts = parts
	b.debouncer, err = r.newDebouncer(ctx, b, input, m)
	return err
}

// checkDebounceStream refuses, without provisioning, a debounce stream
// that lacks what debouncing stands on, naming what to turn on.
func checkDebounceStream(cfg jetstream.StreamConfig) error {
	var missing []string
	for _, need := range []struct {
		on   bool
		what string
	}{
		{cfg.Retention == jetstream.WorkQueuePolicy, "work-queue retention"},
		{cfg.AllowMsgSchedules, "message schedules"},
		{cfg.AllowAtomicPublish, "atomic batches"},
		{cfg.AllowMsgTTL, "per-message TTL"},
	} {
		if !need.on {
			missing = append(missing, need.what)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: debounce stream %s lacks %s; an instance that provisions makes it as debouncing needs",
			ErrServerRefused, cfg.Name, strings.Join(missing, ", "))
	}
	return nil
}

// newDebouncer binds the debouncer's consumer on the input stream: one
// message pending at most, across every instance.
func (r *Runtime) newDebouncer(ctx context.Context, b *binding, input jetstream.Stream, m *manifest.Manifest) (*debouncer, error) {
	f := b.spec
	spec := f
	spec.Durable, spec.Concurrency, spec.MaxAckPending = f.DebouncerDurable(), 1, 1
	var c jetstream.Consumer
	var err error
	if r.opts.noProvision {
		if c, err = input.Consumer(ctx, spec.Durable); err == nil {
			err = errors.Join(checkUnlimitedDeliveries(c, spec), checkPendingBound(c, spec))
		}
	} else {
		c, err = ensureConsumer(ctx, input, spec, m.Digest, b.log, r.positions)
	}
	if err != nil {
		return nil, fmt.Errorf("debouncer consumer %s: %w", spec.Durable, err)
	}
	db := b.sibling(spec, b.log.With("debouncer", spec.Durable))
	streamSpec, _ := m.Stream(f.Stream)
	db.consumer = newConsumerHandle(r.js, spec, streamSpec, m.Digest, !r.opts.noProvision, db.log, c, input.CachedInfo().Created, r.positions)
	db.consumer.scope = db.scope
	bf, err := r.bindBackfill(ctx, db, input, m)
	if err != nil {
		return nil, err
	}
	return &debouncer{b: db, bf: bf, js: r.js, spec: f, key: msgkey.Source{Token: f.Key.Token, Header: f.Key.Header, Field: f.Key.Field}}, nil
}

// run debounces the input until ctx is done, one message at a time: what
// a backfill hands over first, as it was stored before anything the
// debouncer's consumer delivers (a key's messages stay in stream order).
func (d *debouncer) run(ctx context.Context) {
	// The input stream was looked up before the consumer was found, and
	// may have been made again since (consumerHandle.refresh).
	d.b.consumer.recordNow(ctx)
	go d.b.consumer.watch(ctx)
	for ctx.Err() == nil {
		from, wait := d.b, time.Second
		if d.bf != nil {
			from, wait = d.bf, 0
		}
		msgs, err := pullOnce(ctx, d.js.Conn(), from, 1, wait)
		if err != nil && ctx.Err() == nil {
			from.log.Warn("pulling the input to debounce", "err", err)
			from.consumer.check()
			pause(ctx, time.Second)
		}
		if from == d.bf && len(msgs) == 0 && err == nil {
			if d.bf.backfillDone(ctx) {
				d.bf = nil
			} else {
				pause(ctx, backfillCheckEvery/10) // what it holds is not acknowledged yet
			}
		}
		for _, m := range msgs {
			d.debounce(ctx, from, m)
		}
	}
}

// debounce stores m's receipt and schedule and acknowledges it; a message
// without its key is dead-lettered. A batch that fails is tried again
// until it is stored, with InProgress meanwhile. A stop (ctx) does not cut
// a try short: a message left unacknowledged would hold every key's
// debouncing for its ack wait, one message being pending at most. Only a
// try that fails after the stop gives the message up, to come back after
// its ack wait.
func (d *debouncer) debounce(stop context.Context, from *binding, m *nats.Msg) {
	msg, err := from.toMsg(m)
	if err != nil {
		from.log.Error("reading a message to debounce; it comes back after its ack wait", "err", err)
		return
	}
	if from.backfill != nil && !from.backfill.hands(msg.Subject, msg.StreamSequence) {
		if err := reply(d.js.Conn(), m, ackBody); err != nil {
			from.log.Warn("acknowledging a message the backfill does not hand over", "err", err)
		}
		return
	}
	key, kerr := d.key.Of(msg.Subject, msg.Header, msg.Data)
	if kerr != nil {
		from.deadLetter(m, msg, jetfn.Malformed(kerr), attempt{n: 1})
		return
	}
	for {
		err := d.store(stop, msg, key)
		if err == nil {
			break // stored, or a duplicate: stored by an earlier delivery
		}
		if neverStored(err) {
			from.deadLetter(m, msg, jetfn.Permanent(fmt.Errorf("the debounce stream cannot store this message: %w", err)), attempt{n: 1})
			return
		}
		if stop.Err() != nil {
			return
		}
		from.log.Warn("storing a debounced message's schedule; trying again", "stream_seq", msg.StreamSequence, "err", err)
		_ = reply(d.js.Conn(), m, inProgressBody)
		pause(stop, debounceRetryWait)
	}
	if err := reply(d.js.Conn(), m, ackBody); err != nil {
		from.log.Warn("acknowledging a debounced message; it comes back, and its receipt makes it a duplicate", "err", err)
	}
}

// neverStored reports whether the debounce stream refused a batch for
// good: the message, with the receipt's headers, is larger than the server
// or the stream takes. Tried again, it would hold every key's debouncing
// forever, so it is dead-lettered instead.
func neverStored(err error) bool {
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, errTooLargeToStore)
}

// store publishes msg's batch once, within settleTimeout, whether or not
// the debouncer is stopping.
func (d *debouncer) store(stop context.Context, msg jetfn.Msg, key string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(stop), settleTimeout)
	defer cancel()
	receipt, schedule := debounceBatch(d.spec, msg, key, time.Now())
	_, err := publishBatchAcked(ctx, d.js.Conn(), receipt, schedule)
	return err
}

// keyHash names a key in the debounce stream's subjects, whatever bytes
// the key holds.
func keyHash(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return strconv.FormatUint(h.Sum64(), 36)
}

// debounceBatch is an input message's receipt and its key's new schedule,
// due a period from now. Both carry the input as the handler is to see
// it; the receipt lives as long as the stream's duplicate window.
func debounceBatch(f manifest.FunctionSpec, msg jetfn.Msg, key string, now time.Time) (receipt, schedule *nats.Msg) {
	h := keyHash(key)
	identity := msg.StreamIdentity + ":" + strconv.FormatUint(msg.StreamSequence, 10)
	receipt = asRouted(msg, key, f.DebounceSubject(manifest.DebounceSeen, h))
	receipt.Header.Set(jetstream.MsgIDHeader, identity)
	receipt.Header.Set(ttlHeader, f.DebounceWindow().String())
	schedule = asRouted(msg, key, f.DebounceSubject(manifest.DebounceWait, h))
	schedule.Header.Set(scheduleHeader, "@at "+now.Add(f.Debounce).UTC().Format(time.RFC3339Nano))
	schedule.Header.Set(scheduleTargetHeader, f.DebounceRunSubject(partition.Of([]byte(key), f.Partitions), h))
	return receipt, schedule
}

// asRouted is a copy of msg on subject with its origin, key and publisher's
// message ID in the router's headers, which the runner reads as a routed
// copy's (originOf).
func asRouted(msg jetfn.Msg, key, subject string) *nats.Msg {
	out := nats.NewMsg(subject)
	out.Data = msg.Data
	for k, vs := range msg.Header {
		if !strings.HasPrefix(k, "Nats-") && !routerHeaders[k] {
			out.Header[k] = vs
		}
	}
	if orig := msg.Header.Get(jetstream.MsgIDHeader); orig != "" {
		out.Header.Set(originalMsgIDHeader, orig)
	}
	if src := msg.Header.Get(streamSourceHeader); src != "" {
		out.Header.Set(originalSourceHeader, src) // the input sources another stream
	}
	out.Header.Set(routedKeyHeader, key)
	out.Header.Set(routedHeader, fmt.Sprintf("%s %d %s %s", msg.Stream, msg.StreamSequence, msg.Subject, msg.StreamIdentity))
	return out
}

// debounceGuard makes sure, before a due run's handler runs, that the
// key's newest input is not left without its schedule (see the file
// comment).
type debounceGuard struct {
	js     jetstream.JetStream
	spec   manifest.FunctionSpec
	stream jetstream.Stream
}

// rescheduleNewer schedules the key's last input again when the server
// purged its schedule as this run's fired: when its receipt was stored
// before this run (after it, its schedule was stored after the purge, and
// it has a run of its own, waiting or handled), no schedule of the key
// waits, and no run of the key came due after this one (one that was
// scheduled again by an earlier try of this run). The new schedule is due
// a period after that input was debounced, stored only if the wait
// subject is still empty (a newer input's schedule must not be replaced
// by an older one's), and named after the receipt, so that the stream
// takes it once.
//
// m is the run as delivered; the key's hash is its subject's last token,
// as the debouncer wrote it.
func (g *debounceGuard) rescheduleNewer(ctx context.Context, m *nats.Msg, msg jetfn.Msg) error {
	meta, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("reading a due run's sequence: %w", err)
	}
	h := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	last, err := g.stream.GetLastMsgForSubject(ctx, g.spec.DebounceSubject(manifest.DebounceSeen, h))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // expired: nothing newer within the window
	}
	if err != nil {
		return fmt.Errorf("reading the last debounced message of key hash %s: %w", h, err)
	}
	if last.Sequence > meta.Sequence.Stream || last.Header.Get(routedHeader) == fmt.Sprintf("%s %d %s %s", msg.Stream, msg.StreamSequence, msg.Subject, msg.StreamIdentity) {
		return nil // debounced after this run came due, or this run's own
	}
	wait := g.spec.DebounceSubject(manifest.DebounceWait, h)
	for _, subject := range []string{wait, m.Subject} {
		later, err := g.stream.GetLastMsgForSubject(ctx, subject)
		if err == nil && (subject == wait || later.Sequence > meta.Sequence.Stream) {
			return nil // the newer input's schedule waits, or its run came due
		}
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("reading %s: %w", subject, err)
		}
	}
	schedule := nats.NewMsg(wait)
	schedule.Data = last.Data
	for k, vs := range last.Header {
		if !strings.HasPrefix(k, "Nats-") {
			schedule.Header[k] = vs
		}
	}
	schedule.Header.Set(scheduleHeader, "@at "+last.Time.Add(g.spec.Debounce).UTC().Format(time.RFC3339Nano))
	schedule.Header.Set(scheduleTargetHeader, m.Subject)
	_, err = g.js.PublishMsg(ctx, schedule, jetstream.WithExpectLastSequencePerSubject(0),
		jetstream.WithMsgID(last.Header.Get(jetstream.MsgIDHeader)+":again"))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return nil // a newer schedule came meanwhile
	}
	if err != nil {
		return fmt.Errorf("scheduling the last message of key hash %s again: %w", h, err)
	}
	return nil
}

// status adds the input messages the debouncer has not taken yet: those
// wait for the function as surely as its due runs.
func (d *debouncer) status(ctx context.Context, s *wire.Stats) {
	s.Debounce, s.DueRuns = d.spec.Debounce.String(), s.NumPending
	if info, err := d.b.consumer.get().Info(ctx); err == nil {
		s.DebouncePending = info.NumPending + uint64(info.NumAckPending)
		s.NumPending += s.DebouncePending
	}
}
