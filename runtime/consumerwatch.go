package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// restoreTimeout bounds one attempt to bring a consumer back: up to four
// API calls, one of which may create an R3 stream.
const restoreTimeout = 10 * time.Second

// consumerCheckEvery is how often a binding looks at its consumer when no
// pull has failed. A pull against a deleted consumer fails within a pull's
// expiry and triggers a check at once, so this only refreshes the ack
// floor that a recreated consumer starts from.
const consumerCheckEvery = 30 * time.Second

// consumerHandle is a binding's durable consumer, as it is now. An
// operator can delete the consumer or its stream under a running instance;
// the pull then fails forever while the function looks idle. The handle
// notices (a failed pull asks it to check), says so through err, which
// status, metrics and /readyz show, and with provisioning on recreates what
// the manifest declares.
type consumerHandle struct {
	js        jetstream.JetStream
	spec      manifest.FunctionSpec
	stream    manifest.StreamSpec
	digest    string
	provision bool
	log       *slog.Logger
	positions *positionStore
	// scope is the binding's output and dead-letter ID scope (scope.go).
	scope *idScope

	mu      sync.Mutex
	current jetstream.Consumer
	// created is when the stream we know was made: a stream recreated by
	// someone else restarts its sequences.
	created time.Time
	// made is when the consumer we hold was made: one made at another
	// time was made again by someone else, maybe on a new incarnation of
	// the stream (refresh).
	made time.Time
	// ackFloor is the consumer's ack floor when last seen. A recreated
	// consumer starts just after it: what it redelivers was handled at
	// least once already, and handlers are idempotent; starting from the
	// stream's first message would redeliver messages older than any
	// duplicate window.
	ackFloor atomic.Uint64
	// identity is StreamIdentity(created), read for every message.
	identity atomic.Pointer[string]
	missing  atomic.Pointer[string]
	kick     chan struct{}
	// recorded is the ack floor last recorded in positions, so an idle
	// consumer's unchanged floor is not written again every look.
	recorded atomic.Uint64
	// handedOver is set when an Apply moved the function to another
	// durable, or its lineage to a function renamed from it: this
	// consumer's floor is recorded under its own key only, so the
	// function's and the lineage's records keep naming the durable that
	// carries it on (catchup.go reads them).
	handedOver atomic.Bool
	// into is, for a router's consumer, the identity of the keyed stream
	// it copies into, recorded with its floor (position.Into). Such a
	// floor counts messages copied, not handled, so it is recorded under
	// the router's own key only, never as the function's: a plain
	// consumer made from it later (the function no longer ordered) would
	// pass over what still waits in the keyed stream.
	into string
	// quiet is set for a backfill consumer, which the instance that
	// finishes it deletes: missing is its end, not a fault.
	quiet bool
	// onAckWait, when set, hears the server's ackWait at every look: an
	// instance on another revision may have lowered it.
	onAckWait func(time.Duration)
}

func newConsumerHandle(js jetstream.JetStream, spec manifest.FunctionSpec, stream manifest.StreamSpec, digest string, provision bool,
	log *slog.Logger, c jetstream.Consumer, created time.Time, positions *positionStore) *consumerHandle {
	h := &consumerHandle{js: js, spec: spec, stream: stream, digest: digest, provision: provision, log: log,
		positions: positions, current: c, created: created, made: c.CachedInfo().Created, kick: make(chan struct{}, 1)}
	h.ackFloor.Store(c.CachedInfo().AckFloor.Stream)
	h.setIdentity(created)
	h.recorded.Store(^uint64(0)) // nothing recorded yet
	return h
}

// record writes the ack floor last seen to positions, unless it is the
// one written last.
func (h *consumerHandle) record(ctx context.Context) {
	floor := h.ackFloor.Load()
	if h.recorded.Swap(floor) == floor {
		return
	}
	if h.positions == nil {
		return
	}
	filter, notes, err := h.readSubjects(ctx)
	if err != nil {
		h.recorded.Store(^uint64(0)) // the next look tries again
		h.log.Warn("recording the consumer's position", "consumer", h.spec.Durable, "err", err)
		return
	}
	h.positions.record(ctx, position{Function: h.spec.Name, Stream: h.spec.Stream, StreamIdentity: h.streamIdentity(),
		Durable: h.spec.Durable, AckFloor: floor, Filter: filter, Scope: h.scopeName(), Into: h.into,
		HandledThrough: notes}, !h.handedOver.Load() && h.into == "")
}

// readSubjects is what a record says the consumer read, and how far the
// function handled each subject it did not: the consumer's own filter and
// notes as the server last gave them, not the handle's revision's (a
// binding a deploy retires records after the new revision changed them;
// opscheck seed 20261220 recorded a narrowed filter beside the notes its
// rollback had used up, and a consumer made from that record handed the
// subject over from its first message). A subject a running backfill still
// hands over counts as not read, handled through what the backfill
// acknowledged, so a consumer made from the record hands over the rest.
func (h *consumerHandle) readSubjects(ctx context.Context) ([]string, map[string]uint64, error) {
	cfg := h.get().CachedInfo().Config
	filter, notes := filtersOf(cfg), handledNotes(cfg.Metadata)
	name := cfg.Metadata[backfillKey]
	if name == "" {
		return filter, notes, nil
	}
	bf, err := h.js.Consumer(ctx, h.spec.Stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return filter, notes, nil // done
	}
	if err != nil {
		return nil, nil, fmt.Errorf("looking up backfill consumer %s: %w", name, err)
	}
	rng, err := readBackfillRange(bf.CachedInfo().Config.Metadata)
	if err != nil {
		return nil, nil, fmt.Errorf("backfill consumer %s: %w", name, err)
	}
	for s, from := range rng.from {
		filter = slices.DeleteFunc(filter, func(f string) bool { return f == s })
		notes[s] = max(from-1, bf.CachedInfo().AckFloor.Stream)
	}
	return filter, notes, nil
}

// scopeName is the binding's scope, or the function's name for a handle
// without one (a backfill's records nothing).
func (h *consumerHandle) scopeName() string {
	if h.scope == nil {
		return h.spec.Name
	}
	return h.scope.get()
}

// recordNow reads the consumer's ack floor and records it: at bind and
// after a drain, so the position is current when the process stops.
func (h *consumerHandle) recordNow(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, consumerInfoTimeout)
	defer cancel()
	if info, err := h.refresh(ctx); err == nil {
		h.ackFloor.Store(info.AckFloor.Stream)
		h.record(ctx)
	}
}

// refresh reads the consumer's info from the server, and the stream it
// lives on. When the consumer there was made after the one this handle
// holds, another instance made it again, maybe on a stream made again too:
// the handle follows it first, so the floor it reads is recorded under the
// stream incarnation it counts in. A handle that does not pull (a standby
// router) learns of it only here; before, its next record put the new
// consumer's floor under the old identity, over the good record (opscheck
// seed 20261211).
//
// The stream is looked up first, then the consumer: a consumer does not
// outlive its stream, so the one found after the lookup, when it is the one
// the handle holds, lived through it, and that stream is its own. A handle
// made from a stream looked up before its consumer was found (a deploy's
// connect that took seconds while an operator deleted the stream and
// another instance made both again) takes up the right incarnation here
// (opscheck seed 20261218).
func (h *consumerHandle) refresh(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	for tries := 0; ; tries++ {
		s, err := h.js.Stream(ctx, h.spec.Stream)
		if err != nil {
			return nil, err
		}
		c, err := s.Consumer(ctx, h.spec.Durable)
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		same := c.CachedInfo().Created.Equal(h.made)
		h.mu.Unlock()
		h.take(c, s.CachedInfo().Created)
		if same {
			return c.CachedInfo(), nil
		}
		// Made again: look once more, in case the stream was made again
		// between the two lookups and this consumer is not on it.
		if tries == 2 {
			return nil, fmt.Errorf("consumer %s was made again at every look", h.spec.Durable)
		}
	}
}

// take holds consumer c, on the stream incarnation made at created, saying
// so when that is another incarnation than the one the handle read.
func (h *consumerHandle) take(c jetstream.Consumer, created time.Time) {
	h.mu.Lock()
	same := created.Equal(h.created)
	h.mu.Unlock()
	if !same {
		h.log.Info("the stream was made again; reading its new incarnation", "stream", h.spec.Stream, "consumer", h.spec.Durable)
	}
	h.swap(c, created)
}

func (h *consumerHandle) setIdentity(created time.Time) {
	id := StreamIdentity(created)
	h.identity.Store(&id)
}

// streamIdentity names the incarnation of the stream the consumer reads;
// empty for a binding without a consumer (unit tests).
func (h *consumerHandle) streamIdentity() string {
	if h == nil {
		return ""
	}
	if id := h.identity.Load(); id != nil {
		return *id
	}
	return ""
}

func (h *consumerHandle) get() jetstream.Consumer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.current
}

// check asks the watch to look at the consumer now; it never blocks.
func (h *consumerHandle) check() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// err is why the function cannot pull now, or nil.
func (h *consumerHandle) err() error {
	if p := h.missing.Load(); p != nil {
		return errors.New(*p)
	}
	return nil
}

// watch checks the consumer every consumerCheckEvery and whenever a pull
// failed, until ctx is done.
func (h *consumerHandle) watch(ctx context.Context) {
	everyOrKicked(ctx, consumerCheckEvery, h.kick, h.look)
}

// look refreshes the ack floor, or repairs a missing consumer. Any other
// error is an outage: the pull loop keeps retrying, nothing to repair.
func (h *consumerHandle) look(ctx context.Context) {
	infoCtx, cancel := context.WithTimeout(ctx, consumerInfoTimeout)
	defer cancel()
	info, err := h.refresh(infoCtx)
	if err == nil {
		h.ackFloor.Store(info.AckFloor.Stream)
		h.record(infoCtx)
		if h.onAckWait != nil {
			h.onAckWait(info.Config.AckWait)
		}
		if h.spec.Schedule != nil && h.provision && !h.quiet {
			if s, err := h.js.Stream(infoCtx, h.spec.Stream); err == nil {
				h.keepSchedule(infoCtx, s)
			}
		}
		h.found()
		return
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) || h.quiet {
		return
	}
	ctx, cancelRestore := context.WithTimeout(ctx, restoreTimeout)
	defer cancelRestore()
	if rerr := h.restore(ctx); rerr != nil {
		note := fmt.Sprintf("missing consumer %s on stream %s: %v", h.spec.Durable, h.spec.Stream, rerr)
		if h.missing.Swap(&note) == nil {
			h.log.Error("consumer missing; nothing is handled until it is back", "err", note)
		}
		return
	}
	h.found()
}

func (h *consumerHandle) found() {
	if h.missing.Swap(nil) != nil {
		h.log.Warn("consumer is back; handling resumes", "consumer", h.spec.Durable)
	}
}

// restore brings the consumer back: recreated from the manifest with
// provisioning on, else looked up again in case an administrator restored
// it.
func (h *consumerHandle) restore(ctx context.Context) error {
	if h.provision {
		return h.recreate(ctx)
	}
	s, err := h.js.Stream(ctx, h.spec.Stream)
	var c jetstream.Consumer
	if err == nil {
		c, err = s.Consumer(ctx, h.spec.Durable)
	}
	if err != nil {
		return fmt.Errorf("provisioning is off, so jetfn waits for an administrator to recreate it (%w)", err)
	}
	if err := checkUnlimitedDeliveries(c, h.spec); err != nil {
		return err
	}
	h.swap(c, s.CachedInfo().Created)
	return nil
}

// recreate makes the stream if it is gone, then the consumer, starting
// after the highest ack floor known for this incarnation of the stream:
// the one this process saw last, or the recorded one (decideStart).
func (h *consumerHandle) recreate(ctx context.Context) error {
	if err := recreateStream(ctx, h.js, h.stream); err != nil {
		return fmt.Errorf("recreating stream: %w", err)
	}
	s, err := h.js.Stream(ctx, h.spec.Stream)
	if err != nil {
		return fmt.Errorf("looking up stream: %w", err)
	}
	created := s.CachedInfo().Created
	h.mu.Lock()
	sameStream := created.Equal(h.created)
	h.mu.Unlock()
	var seen *knownFloor
	if floor := h.ackFloor.Load(); sameStream && floor > 0 {
		seen = &knownFloor{floor: floor, from: "seen by this process before the consumer was deleted"}
	}
	start, err := decideStart(ctx, s, h.spec, h.positions, seen)
	if err != nil {
		return fmt.Errorf("deciding where the consumer starts: %w", err)
	}
	cfg := consumerConfig(h.spec, h.digest)
	start.apply(&cfg)
	cfg.Metadata[scopeKey] = h.scopeName() // a recreated consumer keeps its function's scope
	if sameStream {
		keepHandledNotes(h.get().CachedInfo().Config.Metadata, cfg.Metadata)
	}
	// The server removes a deleted consumer's files after it announced the
	// deletion, as a stream's (streamDeleteSettle): one made again at once
	// can lose its own, and every later update fails (TestFilterNotesSurviveAConsumerDeletion
	// saw "open .../obs/fn/meta.inf.tmp: no such file or directory").
	pause(ctx, streamDeleteSettle)
	c, err := s.CreateOrUpdateConsumer(ctx, cfg)
	if err != nil {
		// Another instance may have recreated it first, from its own floor,
		// and the server refuses to change a start: use theirs.
		if theirs, lerr := s.Consumer(ctx, h.spec.Durable); lerr == nil {
			h.swap(theirs, created)
			return nil
		}
		return fmt.Errorf("recreating consumer: %w", err)
	}
	h.log.Warn("recreated a deleted consumer from the manifest", "consumer", h.spec.Durable, "stream", h.spec.Stream,
		"start", start.why, "stored_messages_to_handle", c.CachedInfo().NumPending, "stream_recreated", !sameStream)
	h.swap(c, created)
	// At once, not at the next look: until then the record names the old
	// incarnation, which a consumer created meanwhile (a durable renamed)
	// cannot use, and it started from the stream's first message (opscheck
	// seed 20261217).
	h.record(ctx)
	h.keepSchedule(ctx, s)
	return nil
}

// keepHandledNotes copies the handled-through notes of subjects a deploy
// dropped from the deleted consumer's metadata (have) to its replacement's
// (want): without them, a rollback that adds such a subject back would hand
// it over from its first message instead of after what was handled
// (filterchange.go).
func keepHandledNotes(have, want map[string]string) {
	for k, v := range have {
		if strings.HasPrefix(k, handledThroughPrefix) {
			want[k] = v
		}
	}
}

// keepSchedule writes a scheduled function's schedule message again when
// its stream no longer holds one: a stream deleted and made again, or
// purged, lost it with everything else, and with it the ticks. It only
// restores a missing one: an instance of another revision may keep a
// different one during a rolling deploy, and each start settles that.
func (h *consumerHandle) keepSchedule(ctx context.Context, s jetstream.Stream) {
	if h.spec.Schedule == nil || !h.provision || h.quiet || !s.CachedInfo().Config.AllowMsgSchedules {
		return // a stream made without schedules is ensureStream's to fix, at the next start
	}
	restored, err := restoreSchedule(ctx, h.js, s, h.spec)
	switch {
	case err != nil:
		h.log.Warn("restoring the function's schedule; its ticks stop until it is back", "subject", h.spec.ScheduleSubject(), "err", err)
	case restored:
		h.log.Warn("restored the function's schedule: its stream had lost it", "subject", h.spec.ScheduleSubject())
	}
}

// streamDeleteSettle is how long jetfn waits, on finding its stream
// deleted, before it creates it again. nats-server v2.15.2 takes a deleted
// stream out of the account, tells its consumers (the 409 that sends a
// binding here), and only then removes its files, by path: a stream made
// again at once, by an instance or by three, can lose its new files to
// that removal. The server then reports the stream and refuses nothing,
// but drops every message published to it without a reply (opscheck seed
// 104; likely the 45 s timeout TestRecreatedStreamKeepsIdentitiesApart once
// hit in CI).
const streamDeleteSettle = time.Second

// recreateStream makes spec's stream if it is gone, after
// streamDeleteSettle, and looks again before it does: another instance may
// have made it meanwhile.
func recreateStream(ctx context.Context, js jetstream.JetStream, spec manifest.StreamSpec) error {
	if _, err := js.Stream(ctx, spec.Name); !errors.Is(err, jetstream.ErrStreamNotFound) {
		return ensureStream(ctx, js, spec)
	}
	pause(ctx, streamDeleteSettle)
	return ensureStream(ctx, js, spec)
}

func (h *consumerHandle) swap(c jetstream.Consumer, created time.Time) {
	h.mu.Lock()
	h.current, h.created, h.made = c, created, c.CachedInfo().Created
	h.mu.Unlock()
	if old := h.streamIdentity(); old != StreamIdentity(created) {
		h.recorded.Store(^uint64(0)) // the next record is on another incarnation, whatever its floor
	}
	h.setIdentity(created)
	h.ackFloor.Store(c.CachedInfo().AckFloor.Stream)
}
