package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// streamConfig is the JetStream configuration a StreamSpec declares, for a
// stream that does not exist yet.
func streamConfig(s manifest.StreamSpec) jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if s.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	retention := map[string]jetstream.RetentionPolicy{"interest": jetstream.InterestPolicy,
		"workqueue": jetstream.WorkQueuePolicy}[s.Retention] // limits is the zero value
	return jetstream.StreamConfig{
		Name:       s.Name,
		Subjects:   s.Subjects,
		Duplicates: s.Duplicates,
		Storage:    storage,
		Replicas:   s.Replicas,
		MaxAge:     s.MaxAge,
		Retention:  retention,
		MaxMsgs:    unlimitedIfZero(s.MaxMsgs),
		MaxBytes:   unlimitedIfZero(s.MaxBytes),
		Sources:    sourcesOf(s.Source),
		// Message schedules, for a scheduled function's ticks and delayed
		// outputs, which are published in atomic batches.
		AllowMsgSchedules:  s.AllowSchedules,
		AllowAtomicPublish: s.AllowAtomic,
		AllowMsgTTL:        s.AllowTTL, // a debounce stream's receipts
	}
}

// overlayStream is the server's current config with only the fields the
// manifest manages replaced: subjects, duplicates, storage, replicas and
// maxAge always; retention, maxMsgs and maxBytes when the manifest sets
// them. Everything an administrator tuned besides (description, max
// message size, compression, allow-direct, metadata, sources, placement…)
// stays as it is: CreateOrUpdateStream replaces the whole config.
func overlayStream(have jetstream.StreamConfig, s manifest.StreamSpec) jetstream.StreamConfig {
	want := streamConfig(s)
	out := have
	out.Subjects, out.Duplicates, out.Storage = want.Subjects, want.Duplicates, want.Storage
	out.Replicas, out.MaxAge = want.Replicas, want.MaxAge
	if s.Retention != "" {
		out.Retention = want.Retention
	}
	if s.MaxMsgs != 0 {
		out.MaxMsgs = want.MaxMsgs
	}
	if s.MaxBytes != 0 {
		out.MaxBytes = want.MaxBytes
	}
	if s.Source != nil {
		keepSourceStart(have.Sources, want.Sources)
		out.Sources = want.Sources
	}
	// The server cannot turn message schedules off once on.
	out.AllowMsgSchedules = have.AllowMsgSchedules || want.AllowMsgSchedules
	out.AllowAtomicPublish = have.AllowAtomicPublish || want.AllowAtomicPublish // a deploy that drops a delay leaves batches possible
	out.AllowMsgTTL = have.AllowMsgTTL || want.AllowMsgTTL
	out.Metadata = withoutServerKeys(have.Metadata)
	return out
}

// sameConfig reports whether the server's config already is the one jetfn
// would send, ignoring the metadata the server adds itself.
func sameConfig[C any](have, want C, metadata func(*C) *map[string]string) bool {
	h, w := metadata(&have), metadata(&want)
	*h, *w = withoutServerKeys(*h), withoutServerKeys(*w)
	if len(*h) == 0 && len(*w) == 0 {
		*h, *w = nil, nil
	}
	return reflect.DeepEqual(have, want)
}

// withoutServerKeys drops the _nats.* metadata the server adds itself.
func withoutServerKeys(md map[string]string) map[string]string {
	if md == nil {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		if !strings.HasPrefix(k, "_nats.") {
			out[k] = v
		}
	}
	return out
}

// unlimitedIfZero maps the manifest's 0 (unlimited) to the server's -1.
func unlimitedIfZero(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// ensureStream creates the stream or updates it in place. An update keeps
// every stored message and the duplicate memory; a change that would delete
// messages (a shorter maxAge) is refused here, and one the server refuses is
// reported with the fields that differ.
func ensureStream(ctx context.Context, js jetstream.JetStream, spec manifest.StreamSpec) error {
	want := streamConfig(spec)
	var have *jetstream.StreamConfig
	if s, err := js.Stream(ctx, spec.Name); err == nil {
		have = &s.CachedInfo().Config
		want = overlayStream(*have, spec)
		if shrinksAge(have.MaxAge, want.MaxAge) {
			return fmt.Errorf("%w: stream %s field maxAge: shrinking it from %s to %s would delete stored messages",
				ErrServerRefused, spec.Name, ageString(have.MaxAge), ageString(want.MaxAge))
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("looking up stream %s: %w", spec.Name, err)
	}
	if have != nil && sameConfig(*have, want, func(c *jetstream.StreamConfig) *map[string]string { return &c.Metadata }) {
		return nil // every instance starts here: no update (for R3, no Raft proposal) when nothing changes
	}
	if _, err := js.CreateOrUpdateStream(ctx, want); err != nil {
		if have != nil {
			return fmt.Errorf("%w: stream %s: %v (fields that differ from the server's: %s)",
				ErrServerRefused, spec.Name, err, streamDiff(*have, want))
		}
		return fmt.Errorf("%w: creating stream %s: %v", ErrServerRefused, spec.Name, err)
	}
	return nil
}

// shrinksAge reports whether a new age limit is tighter than the current
// one (zero means unlimited).
func shrinksAge(have, want time.Duration) bool {
	return want != 0 && (have == 0 || want < have)
}

func ageString(d time.Duration) string {
	if d == 0 {
		return "unlimited"
	}
	return d.String()
}

// streamDiff names the manifest fields whose values differ from the server's.
func streamDiff(have, want jetstream.StreamConfig) string {
	var d differ
	d.field("storage", have.Storage, want.Storage)
	d.field("replicas", have.Replicas, want.Replicas)
	d.field("maxAge", have.MaxAge, want.MaxAge)
	d.field("duplicates", have.Duplicates, want.Duplicates)
	d.field("subjects", have.Subjects, want.Subjects)
	d.field("retention", have.Retention, want.Retention)
	d.field("maxMsgs", have.MaxMsgs, want.MaxMsgs)
	d.field("maxBytes", have.MaxBytes, want.MaxBytes)
	d.field("sources", have.Sources, want.Sources)
	return d.String()
}

// consumerConfig is the durable pull consumer a FunctionSpec declares.
// The consumer gets no server-side BackOff: the server would replace
// AckWait with BackOff[0], which breaks the heartbeat timing. The runtime
// applies the backoff itself with NakWithDelay.
//
// Nor does it get the server's MaxDeliver: the server would drop a message
// whose last allowed delivery died with its process, saying so only in a
// core-NATS advisory that is lost when no instance listens. With the
// server's limit off, such a message comes once more, and the runtime
// dead-letters it without running the handler (binding.process). The
// manifest's maxDeliver is kept in the consumer's metadata.
func consumerConfig(f manifest.FunctionSpec, digest string) jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Durable:       f.Durable,
		Description:   "jetfn function " + f.Name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       f.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: f.MaxAckPending,
		Metadata:      consumerMetadata(f, digest),
	}
	if subjects := f.FilterSubjects(); len(subjects) == 1 {
		cfg.FilterSubject = subjects[0]
	} else {
		cfg.FilterSubjects = subjects
	}
	return cfg
}

// digestKey is the consumer metadata key naming the manifest (its digest)
// that last configured the consumer, so an instance on another manifest
// can tell that two revisions are fighting over it.
const digestKey = "jetfn.manifest_digest"

// consumerMetadata names the function and its manifest, and carries its
// monitor thresholds in the keys natscli's consumer check reads.
func consumerMetadata(f manifest.FunctionSpec, digest string) map[string]string {
	md := map[string]string{wire.FunctionMetadataKey: f.Name, "jetfn.version": f.Version,
		"jetfn.max_deliver": strconv.Itoa(f.MaxDeliver), digestKey: digest}
	if f.IsKeyed() && f.Stream != f.KeyedStreamName() || f.IsDebounced() && f.Stream != f.DebounceStreamName() {
		md[wire.RoleMetadataKey] = wire.RoleRouter // on the input stream: only the router reads there
	}
	m := f.Monitor
	if m == nil {
		return md
	}
	md["io.nats.monitor.enabled"] = "true"
	for key, n := range map[string]int{
		"io.nats.monitor.outstanding-ack-critical": m.AckPendingCritical,
		"io.nats.monitor.unprocessed-critical":     m.PendingCritical,
		"io.nats.monitor.redelivery-critical":      m.RedeliveryCritical,
	} {
		if n > 0 {
			md[key] = strconv.Itoa(n)
		}
	}
	for key, d := range map[string]time.Duration{
		"io.nats.monitor.last-ack-critical":      m.LastAckCritical,
		"io.nats.monitor.last-delivery-critical": m.LastDeliveryCritical,
	} {
		if d > 0 {
			md[key] = d.String()
		}
	}
	return md
}

// ensureConsumer creates the function's durable consumer, or updates an
// existing one by overlaying only the fields jetfn manages (overlayConsumer).
// It warns when another manifest configured the consumer differently: two
// instances on different revisions would overwrite each other at every
// start.
func ensureConsumer(ctx context.Context, stream jetstream.Stream, f manifest.FunctionSpec, digest string, log *slog.Logger,
	positions *positionStore) (jetstream.Consumer, error) {
	return ensureConsumerAfter(ctx, stream, f, digest, log, positions, nil)
}

// ensureConsumerAfter is ensureConsumer with one more known floor, seen, that
// a consumer it creates resumes after unless positions know a higher one.
func ensureConsumerAfter(ctx context.Context, stream jetstream.Stream, f manifest.FunctionSpec, digest string, log *slog.Logger,
	positions *positionStore, seen *knownFloor) (jetstream.Consumer, error) {
	want := consumerConfig(f, digest)
	existing, err := stream.Consumer(ctx, f.Durable)
	var start *startDecision
	switch {
	case err == nil:
		have := existing.CachedInfo().Config
		want = overlayConsumer(have, f, digest)
		if sameConfig(have, want, func(c *jetstream.ConsumerConfig) *map[string]string { return &c.Metadata }) {
			return existing, nil
		}
		warnIfOtherManifest(log, have, want, f, digest)
		if err := prepareFilterChange(ctx, stream, existing, f, digest, &want, positions); err != nil {
			return nil, fmt.Errorf("changing the subject filter of consumer %s of function %s: %w", f.Durable, f.Name, err)
		}
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		d, err := decideStart(ctx, stream, f, positions, seen)
		if err != nil {
			return nil, fmt.Errorf("deciding where consumer %s of function %s starts: %w", f.Durable, f.Name, err)
		}
		d.apply(&want)
		want.Metadata[scopeKey] = decideScope(ctx, stream, f, positions)
		if err := handOverUnread(ctx, stream, f, digest, d, &want); err != nil {
			return nil, fmt.Errorf("handing over what consumer %s of function %s starts past: %w", f.Durable, f.Name, err)
		}
		start = &d
	default:
		return nil, fmt.Errorf("looking up consumer %s of function %s: %w", f.Durable, f.Name, err)
	}
	create := stream.CreateOrUpdateConsumer
	switch {
	case start != nil:
		create = stream.CreateConsumer // refused if another instance created it since the lookup
	case startsBackfill(existing, want):
		create = func(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
			return changeFilterHeld(ctx, stream, cfg, log)
		}
	}
	c, err := create(ctx, want)
	if start != nil && errors.Is(err, jetstream.ErrConsumerExists) {
		// Instances starting at once all find no consumer; the first to
		// create it records its floor at once, and one that read the record
		// after its lookup decided another start, which the server will not
		// change. Theirs stands: take it as found, without the backfill
		// this one made unless theirs names it too.
		dropUnnamedBackfill(ctx, stream, f, want.Metadata[backfillKey], log)
		return ensureConsumerAfter(ctx, stream, f, digest, log, positions, seen)
	}
	if err == nil {
		if start != nil {
			logCreated(log, c, *start)
		}
		return c, nil
	}
	detail := ""
	if existing != nil {
		detail = " (fields that differ from the server's: " + consumerDiff(existing.CachedInfo().Config, want) + ")"
	}
	return nil, fmt.Errorf("%w: consumer %s of function %s: %v%s", ErrServerRefused, f.Durable, f.Name, err, detail)
}

// logCreated says where a consumer jetfn created starts and how many
// stored messages that hands to the function: a warning when no known
// position decided it and stored messages wait, since those are handled
// now for the first time by this consumer, or, if it handled them under a
// name jetfn does not know, again.
func logCreated(log *slog.Logger, c jetstream.Consumer, d startDecision) {
	if log == nil {
		return
	}
	info := c.CachedInfo()
	level := slog.LevelInfo
	if !d.resumed && info.NumPending > 0 {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "created the function's consumer", "consumer", info.Name,
		"start", d.why, "stored_messages_to_handle", info.NumPending)
}

// overlayConsumer is the server's current consumer config with the fields
// jetfn manages replaced: ack policy, ackWait, max deliver (unlimited),
// maxAckPending, filter subjects, no server BackOff, and jetfn's metadata
// keys (jetfn.*, and io.nats.monitor.* when the manifest has a monitor
// block). The start (deliver policy) cannot change; a description or
// metadata an administrator set stays.
func overlayConsumer(have jetstream.ConsumerConfig, f manifest.FunctionSpec, digest string) jetstream.ConsumerConfig {
	want := consumerConfig(f, digest)
	out := have
	out.AckPolicy, out.AckWait, out.MaxDeliver, out.MaxAckPending = want.AckPolicy, want.AckWait, want.MaxDeliver, want.MaxAckPending
	out.FilterSubject, out.FilterSubjects, out.BackOff = want.FilterSubject, want.FilterSubjects, nil
	if out.Description == "" {
		out.Description = want.Description
	}
	md := withoutServerKeys(have.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	for k := range md {
		if strings.HasPrefix(k, "jetfn.") && !keptMetadata(k) || f.Monitor != nil && strings.HasPrefix(k, "io.nats.monitor.") {
			delete(md, k)
		}
	}
	maps.Copy(md, want.Metadata)
	out.Metadata = md
	return out
}

// warnIfOtherManifest logs when the consumer was last configured by a
// different manifest and this start changes it: the sign of a rolling
// update in progress, or of instances left on an old revision.
func warnIfOtherManifest(log *slog.Logger, have, want jetstream.ConsumerConfig, f manifest.FunctionSpec, digest string) {
	theirs := have.Metadata[digestKey]
	if log == nil || theirs == "" || theirs == digest {
		return
	}
	if diff := consumerDiff(have, want); diff != "none" {
		log.Warn("consumer was configured by another manifest; instances on different manifests overwrite each other's consumer config at every start (see docs/deploying.md: rolling updates with file manifests)",
			"consumer", f.Durable, "their_manifest_digest", theirs, "manifest_digest", digest, "changes", diff)
	}
}

func consumerDiff(have, want jetstream.ConsumerConfig) string {
	var d differ
	d.field("ackWait", have.AckWait, want.AckWait)
	d.field("maxDeliver (jetfn counts it; the server's is unlimited)", have.MaxDeliver, want.MaxDeliver)
	d.field("maxAckPending", have.MaxAckPending, want.MaxAckPending)
	d.field("subject", append([]string{have.FilterSubject}, have.FilterSubjects...),
		append([]string{want.FilterSubject}, want.FilterSubjects...))
	d.field("ackPolicy (set by jetfn)", have.AckPolicy, want.AckPolicy)
	d.field("deliverPolicy (set by jetfn)", have.DeliverPolicy, want.DeliverPolicy)
	d.field("backoff (jetfn keeps it client-side)", have.BackOff, want.BackOff)
	return d.String()
}

// differ collects "field (server → manifest)" notes.
type differ struct{ notes []string }

func (d *differ) field(name string, have, want any) {
	h, w := fmt.Sprint(have), fmt.Sprint(want)
	if h != w {
		d.notes = append(d.notes, fmt.Sprintf("%s (%s → %s)", name, h, w))
	}
}

func (d *differ) String() string {
	if len(d.notes) == 0 {
		return "none"
	}
	return strings.Join(d.notes, ", ")
}

// refusesSchedules says why the server would refuse to turn message
// schedules on for a stream configured as have ("": it would not). It
// turns rollups on with them, and allows purges, by itself, unless purges
// were denied: a deny cannot be cancelled.
func refusesSchedules(have jetstream.StreamConfig) string {
	switch {
	case have.Discard == jetstream.DiscardNew:
		return "discard new"
	case have.Mirror != nil:
		return "a mirror"
	case len(have.Sources) > 0:
		return "sources"
	case have.AllowMsgCounter:
		return "counters"
	case have.DenyPurge:
		return "deny purge (schedules need rollups, which need purges)"
	case have.Sealed:
		return "a seal"
	}
	return ""
}

// ServerRefusals lists the stream changes in m that the server (or jetfn's
// no-deletion rule) would refuse, by comparing with the streams as they are
// now; `jetfn deploy` shows them before anything is stored.
func ServerRefusals(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest) ([]string, error) {
	var out []string
	for _, spec := range m.Streams {
		s, err := js.Stream(ctx, spec.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("looking up stream %s: %w", spec.Name, err)
		}
		have, want := s.CachedInfo().Config, streamConfig(spec)
		if have.Storage != want.Storage {
			out = append(out, fmt.Sprintf("stream %s: storage %s → %s cannot change in place", spec.Name, have.Storage, want.Storage))
		}
		if shrinksAge(have.MaxAge, want.MaxAge) {
			out = append(out, fmt.Sprintf("stream %s: maxAge %s → %s would delete stored messages", spec.Name, ageString(have.MaxAge), ageString(want.MaxAge)))
		}
		if why := refusesSchedules(have); want.AllowMsgSchedules && !have.AllowMsgSchedules && why != "" {
			out = append(out, fmt.Sprintf("stream %s: a scheduled function needs message schedules on, which the server refuses for a stream with %s", spec.Name, why))
		}
	}
	for _, f := range m.Functions {
		err := refuseDebounceChange(ctx, js, f)
		if err == nil && f.IsKeyed() {
			err = refuseRepartition(ctx, js, f, m.KeyedStream(f, time.Now()))
		}
		if err != nil {
			out = append(out, fmt.Sprintf("function %s: %s", f.Name, strings.TrimPrefix(err.Error(), ErrServerRefused.Error()+": ")))
		}
	}
	return out, nil
}
