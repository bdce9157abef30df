package runtime

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.opentelemetry.io/otel/trace"
)

// DefaultDrainTimeout is how long a shutdown lets in-flight handlers finish.
const DefaultDrainTimeout = 30 * time.Second

// Runtime binds a manifest's functions to their consumers on one NATS
// connection. Create it with New and run it with Run.
type Runtime struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	manifest  *manifest.Manifest
	functions map[string]jetfn.Constructor
	// registry is every compiled-in function, for the config checks.
	registry []jetfn.Function
	opts     options
	ready    chan struct{}
	// probeNow asks watchRemotes for a probe at once: a remote function
	// was bound.
	probeNow chan struct{}

	mu       sync.Mutex
	active   []*active // in manifest order
	applying sync.Mutex
	stopped  bool // guarded by applying: Run has begun its shutdown
	// refusal is why Apply last refused a manifest ("" once one applies);
	// every function's status shows it.
	refusal atomic.Pointer[string]
	// positions records consumers' ack floors (positions.go); opened by
	// Run.
	positions *positionStore
	// attempts records handler runs of redelivered messages
	// (attempts.go); opened by Run.
	attempts *attemptStore
	// shared holds the buckets of rate limits (ratelimit.go) and singleton
	// leases (singleton.go), by name, once opened.
	sharedMu sync.Mutex
	shared   map[string]*sharedKV
	leases   map[string]*lease
	// instance names this runtime as a singleton lease's holder.
	instance string
	// deployed is the manifest digest and deployment revision running, for
	// every function's status.
	deployed deployed
}

// deployed is what an instance runs now: jetfn status shows it per
// instance, so instances left on another revision are seen.
type deployed struct {
	revision atomic.Uint64
	digest   atomic.Pointer[string]
}

func (d *deployed) setDigest(digest string) { d.digest.Store(&digest) }

// fill writes the revision and digest into s.
func (d *deployed) fill(s *wire.Stats) {
	if d == nil {
		return
	}
	s.Revision = d.revision.Load()
	if p := d.digest.Load(); p != nil {
		s.ManifestDigest = *p
	}
}

// SetRevision records which revision of a deployment the runtime runs
// (jetfn run --deployment).
func (r *Runtime) SetRevision(n uint64) { r.deployed.revision.Store(n) }

type options struct {
	log              *slog.Logger
	mongo            *mongo.Database
	drainTimeout     time.Duration
	allowShortWindow bool
	noProvision      bool
	prune            bool
	// noBufferBeats turns the buffer keeper off; only tests set it, to
	// show what the keeper prevents.
	noBufferBeats bool
	observe       func(function string, d time.Duration)
	tracer        trace.Tracer // nil: tracing off (tracing.go)
	// remoteProbe is how often remote functions look up their instances.
	remoteProbe time.Duration
}

// Option configures a Runtime.
type Option func(*options) error

// setting is an Option that cannot be wrong.
func setting(set func(*options)) Option {
	return func(o *options) error {
		set(o)
		return nil
	}
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("WithLogger: nil logger")
		}
		o.log = l
		return nil
	}
}

// WithMongo gives functions a database through Deps.Mongo.
func WithMongo(db *mongo.Database) Option {
	return setting(func(o *options) { o.mongo = db })
}

// WithDrainTimeout sets how long a shutdown waits for in-flight handlers.
func WithDrainTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("WithDrainTimeout: %s is not positive", d)
		}
		o.drainTimeout = d
		return nil
	}
}

// AllowShortWindow turns the duplicate-window check (ErrShortWindow) from
// an error into a logged warning, for deployers who accept the risk.
func AllowShortWindow() Option {
	return setting(func(o *options) { o.allowShortWindow = true })
}

// WithoutProvisioning makes Run only look up the manifest's streams and
// consumers, never create or update them, so the instance can run with the
// narrower permissions of `jetfn permissions` (without --provision).
func WithoutProvisioning() Option {
	return setting(func(o *options) { o.noProvision = true })
}

// WithPrune makes Apply delete the durable consumer of a function a new
// manifest removes, after draining it. Without it the consumer stays, and
// so does its position, for the day the function comes back.
func WithPrune() Option {
	return setting(func(o *options) { o.prune = true })
}

// WithHandlerObserver calls observe with every handler run's duration, for
// a metrics histogram. It runs on the handling path: keep it cheap.
func WithHandlerObserver(observe func(function string, d time.Duration)) Option {
	return setting(func(o *options) { o.observe = observe })
}

// New validates the manifest against the compiled-in functions and returns
// a Runtime ready to Run. It does not touch the server yet.
func New(nc *nats.Conn, m *manifest.Manifest, functions []jetfn.Function, opts ...Option) (*Runtime, error) {
	o := options{log: slog.New(slog.NewTextHandler(io.Discard, nil)), drainTimeout: DefaultDrainTimeout,
		remoteProbe: DefaultRemoteProbe}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if err := m.Validate(Names(functions)); err != nil {
		return nil, err
	}
	if err := manifest.CheckConfigs(m, functions); err != nil {
		return nil, err
	}
	if err := m.CheckDuplicateWindows(); err != nil {
		if !o.allowShortWindow {
			return nil, err
		}
		o.log.Warn("running with a short duplicate window", "err", err)
	}
	for _, w := range m.OutputStreamWarnings() {
		o.log.Warn("output stream can forget message IDs", "warning", w)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	byName := map[string]jetfn.Constructor{}
	for _, f := range functions {
		byName[f.Name] = f.New
	}
	r := &Runtime{nc: nc, js: js, manifest: m, functions: byName, registry: functions, opts: o,
		ready: make(chan struct{}), probeNow: make(chan struct{}, 1),
		shared: map[string]*sharedKV{}, leases: map[string]*lease{}, instance: rand.Text()}
	r.deployed.setDigest(m.Digest)
	return r, nil
}

// Names lists the functions' names, sorted, for messages and validation.
func Names(functions []jetfn.Function) []string {
	names := make([]string, 0, len(functions))
	for _, f := range functions {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return names
}

// Ready is closed once every function is bound and registered.
func (r *Runtime) Ready() <-chan struct{} { return r.ready }

// Run creates the streams and consumers, binds every manifest function,
// registers its micro service and handles messages until ctx is done. Then
// it drains every function (see binding.run), stops the services and
// flushes the connection. Draining the connection itself is left to its
// owner. While it runs, Apply switches it to a new manifest.
func (r *Runtime) Run(ctx context.Context) error {
	r.reportAsyncErrors()
	var watchers sync.WaitGroup
	defer watchers.Wait()
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	watchers.Go(func() { r.watchRemotes(watchCtx) })
	m := r.currentManifest()
	// Positions first: a keyed stream made again resumes from one.
	r.positions = openPositions(ctx, r.js, m, !r.opts.noProvision, r.opts.log)
	if err := r.provisionStreams(ctx, m); err != nil {
		return err
	}
	r.pruneDebouncePartitions(ctx, m)
	r.attempts = openAttempts(ctx, r.js, m, !r.opts.noProvision, r.opts.log)
	prepared, err := r.prepareAll(m, m.Functions)
	if err != nil {
		return err
	}
	for i, b := range prepared {
		a, err := r.activate(ctx, b, m)
		if err != nil {
			r.stopAll()
			closeHandlers(prepared[i:])
			return fmt.Errorf("binding %s: %w", b.spec.Name, err)
		}
		r.mu.Lock()
		r.active = append(r.active, a)
		r.mu.Unlock()
	}
	// A probe now, with every binding active, finds the remote functions'
	// endpoints (or their absence) at once rather than an interval later.
	r.probeRemotesNow()
	close(r.ready)
	r.opts.log.Info("runtime ready", "functions", len(m.Functions), "manifest_digest", m.Digest)
	<-ctx.Done()
	// An Apply in progress finishes first; none starts after this.
	r.applying.Lock()
	r.stopped = true
	r.applying.Unlock()
	r.stopAll()
	_ = r.nc.Flush()
	r.opts.log.Info("drained")
	return nil
}

// stopAll drains every function at once and unregisters it. The functions
// stay listed (and in Stats) until they have drained.
func (r *Runtime) stopAll() {
	stopConcurrently(r.bound())
	r.mu.Lock()
	r.active = nil
	r.mu.Unlock()
}

// Manifest is the manifest the runtime runs now: the one it started with or
// the last one Apply accepted.
func (r *Runtime) Manifest() *manifest.Manifest { return r.currentManifest() }

func (r *Runtime) currentManifest() *manifest.Manifest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.manifest
}

// prepare builds a function's binding up to what touches the server: its
// handler (the constructor runs here) and its counters. Run and Apply
// prepare every binding before they change anything, so a constructor that
// fails leaves everything as it was.
func (r *Runtime) prepare(spec manifest.FunctionSpec, m *manifest.Manifest) (*binding, error) {
	log := r.opts.log.With("function", spec.Name)
	stats := newCounters(spec.Concurrency)
	scope := newIDScope(spec.Name) // until connect reads the consumer's
	deps := jetfn.Deps{
		Logger:    log,
		Config:    spec.Config,
		Publisher: outputPublisher{js: r.js, function: spec.Name, scope: scope, outputs: spec.OutputSubjects(), delayed: spec.DelayedOutputSubjects(), stats: stats, log: log, tracer: r.opts.tracer},
		Mongo:     r.opts.mongo,
	}
	var handler jetfn.Handler
	var remote *remoteState
	if spec.IsRemote() {
		h := newRemoteHandler(r.nc, spec, deps)
		handler, remote = h, h.state
	} else {
		var err error
		if handler, err = r.functions[spec.Name](deps); err != nil {
			return nil, fmt.Errorf("binding %s: constructing handler: %w", spec.Name, err)
		}
	}
	b := &binding{
		spec: spec, handler: handler, js: r.js, remote: remote,
		dlSubject:   m.DeadLetterSubject(spec.Name),
		ackPrefix:   ackPrefix(spec.Stream, spec.Durable),
		stats:       stats,
		log:         log,
		bufferBeats: !r.opts.noBufferBeats,
		observe:     r.opts.observe,
		refusal:     &r.refusal,
		deployed:    &r.deployed,
		scope:       scope,
		attempts:    r.attempts,
		runs:        newRunRing(wire.RunHistory),
	}
	b.heartbeat.Store(int64(spec.Heartbeat))
	b.trace = newRunTracer(r.opts.tracer, &b.spec)
	if spec.IsKeyed() {
		b.gate = make(chan struct{}, spec.Concurrency)
	}
	return b, nil
}

// connect looks up the binding's stream and creates or updates its
// consumer.
func (r *Runtime) connect(ctx context.Context, b *binding, m *manifest.Manifest) error {
	spec := b.spec
	stream, err := r.js.Stream(ctx, spec.Stream)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", spec.Stream, err)
	}
	if err := checkInputRetention(stream, spec); err != nil {
		return err
	}
	if r.opts.noProvision && spec.Schedule != nil {
		b.log.Warn("--no-provision: this instance does not write the function's schedule; it ticks as an instance that provisions last wrote it, or not at all",
			"subject", spec.ScheduleSubject(), "schedule", spec.Schedule.Pattern())
	}
	if !r.opts.noProvision && !spec.IsKeyed() && stream.CachedInfo().Config.AllowMsgSchedules && m.ScheduleOwner(spec) {
		err := ensureSchedule(ctx, r.js, stream, spec)
		if err != nil && spec.Schedule != nil {
			return err
		}
		if err != nil {
			// Without a schedule in the manifest, the permissions may not
			// cover the look for one a deploy removed.
			b.log.Warn("looking for a schedule a deploy removed; purge it by hand if ticks go on", "subject", spec.ScheduleSubject(), "err", err)
		}
	}
	r.shareLimits(b, m)
	if spec.IsDebounced() {
		return r.connectDebounced(ctx, b, stream, m)
	}
	if spec.IsKeyed() {
		return r.connectParts(ctx, b, stream, m)
	}
	consumer, err := r.consumer(ctx, stream, spec, m.Digest, b.log)
	if err != nil {
		return err
	}
	streamSpec, _ := m.Stream(spec.Stream)
	b.consumer = newConsumerHandle(r.js, spec, streamSpec, m.Digest, !r.opts.noProvision, b.log,
		consumer, stream.CachedInfo().Created, r.positions)
	b.scope.set(scopeOf(consumer.CachedInfo().Config, spec))
	b.consumer.scope = b.scope
	b.consumer.recordNow(ctx) // looked up again: the stream may be made again since
	b.consumer.onAckWait = b.followServerAckWait
	b.bf, err = r.bindBackfill(ctx, b, stream, m)
	return err
}

// shareLimits gives the binding its function's rate limiter and lease,
// which every binding of the function in this runtime shares (its
// backfill, its partitions).
func (r *Runtime) shareLimits(b *binding, m *manifest.Manifest) {
	spec := b.spec
	rates := func() *sharedKV {
		return r.sharedBucket(m, jetstream.KeyValueConfig{Bucket: manifest.RatesBucket,
			TTL: manifest.RatesTTL, Description: "jetfn: each rate-limited function's schedule, shared by its instances"})
	}
	if spec.RateLimit != nil {
		b.rate = newRateLimiter(*spec.RateLimit, rates(), spec.Name, b.log)
	}
	if spec.KeyRateLimit != nil && spec.IsKeyed() {
		b.keyRate = newKeyRateLimiter(*spec.KeyRateLimit, rates(), spec.Name, b.log)
	}
	if spec.Singleton {
		b.lease = r.leaseOf(spec.Name, m, b.log)
	}
}

// sharedBucket is a bucket the instances of some functions share (rates,
// leases): one per runtime and name, opened on first use (sharedKV).
func (r *Runtime) sharedBucket(m *manifest.Manifest, cfg jetstream.KeyValueConfig) *sharedKV {
	r.sharedMu.Lock()
	defer r.sharedMu.Unlock()
	if r.shared[cfg.Bucket] == nil {
		create := !r.opts.noProvision
		r.shared[cfg.Bucket] = &sharedKV{open: func(ctx context.Context) (jetstream.KeyValue, error) {
			return openShared(ctx, r.js, m, cfg, create)
		}}
	}
	return r.shared[cfg.Bucket]
}

// leaseOf is this runtime's lease of a singleton function, one for every
// binding of it: a live deploy's new binding shares the old one's, so
// re-binding neither hands the lease over nor releases it
// (singleton.go).
func (r *Runtime) leaseOf(function string, m *manifest.Manifest, log *slog.Logger) *lease {
	kv := r.sharedBucket(m, jetstream.KeyValueConfig{Bucket: manifest.LeasesBucket,
		Description: "jetfn: which instance pulls each singleton function's messages"})
	r.sharedMu.Lock()
	defer r.sharedMu.Unlock()
	if r.leases[function] == nil {
		r.leases[function] = newLease(kv, function, r.instance, log)
	}
	return r.leases[function]
}

// provisionStreams creates or updates the streams. Without provisioning
// there is nothing to do here: bind looks up each function's own stream,
// and output and dead-letter streams are only published to.
func (r *Runtime) provisionStreams(ctx context.Context, m *manifest.Manifest) error {
	if r.opts.noProvision {
		return nil
	}
	for _, s := range m.Streams {
		if err := ensureStream(ctx, r.js, s); err != nil {
			return err
		}
	}
	if err := ensureKeyedStreams(ctx, r.js, m, r.positions, r.opts.log); err != nil {
		return err
	}
	return ensureDebounceStreams(ctx, r.js, m)
}

func (r *Runtime) consumer(ctx context.Context, stream jetstream.Stream, spec manifest.FunctionSpec, digest string,
	log *slog.Logger) (jetstream.Consumer, error) {
	if !r.opts.noProvision {
		keyed := aheadWhileKeyed(ctx, r.js, stream, spec, log)
		catchUpReturningDurable(ctx, r.js, stream, spec, r.positions, log, keyed)
		return ensureConsumerAfter(ctx, stream, spec, digest, log, r.positions, keyed.known())
	}
	c, err := stream.Consumer(ctx, spec.Durable)
	if err != nil {
		return nil, fmt.Errorf("looking up consumer %s (provisioning is off): %w", spec.Durable, err)
	}
	if err := checkUnlimitedDeliveries(c, spec); err != nil {
		return nil, err
	}
	return c, nil
}

// reportAsyncErrors logs what the server refuses asynchronously, such as a
// permissions violation on a pull request, which would otherwise only look
// like an idle consumer. It keeps the connection's own handler, and runs
// before micro registers, which wraps whatever handler is set then.
func (r *Runtime) reportAsyncErrors() {
	prev := r.nc.Opts.AsyncErrorCB
	r.nc.SetErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
		subject := ""
		if sub != nil {
			subject = sub.Subject
		}
		r.opts.log.Error("NATS refused an operation", "err", err, "subscription", subject)
		if prev != nil {
			prev(nc, sub, err)
		}
	})
}

// Stats returns a snapshot of every bound function's counters, including
// its consumer's pending figures, for metrics and health endpoints.
func (r *Runtime) Stats() []wire.Stats {
	r.mu.Lock()
	all := slices.Clone(r.active)
	r.mu.Unlock()
	out := make([]wire.Stats, 0, len(all))
	for _, a := range all {
		out = append(out, a.b.status())
	}
	return out
}

// checkInputRetention refuses an input stream that deletes messages once
// consumed, as the manifest's check does for one it declares
// (manifest.validateInputRetention): this one's retention was set on the
// server, and the manifest leaves it alone.
func checkInputRetention(s jetstream.Stream, spec manifest.FunctionSpec) error {
	ret := s.CachedInfo().Config.Retention
	if ret == jetstream.LimitsPolicy {
		return nil
	}
	return fmt.Errorf("%w: stream %s has retention %s on the server and function %s reads it: a stream that deletes "+
		"a message once consumed loses what is published while the function's consumer is deleted, pruned or not "+
		"yet created, though its publisher gets a PubAck; give it retention limits (`retention: limits` in the "+
		"manifest makes jetfn set it)", ErrServerRefused, s.CachedInfo().Config.Name, strings.ToLower(ret.String()), spec.Name)
}

// checkUnlimitedDeliveries refuses a consumer, made by someone else, whose
// server-side max_deliver is finite: jetfn counts maxDeliver itself and
// needs the server's unlimited, so that a message whose last allowed
// delivery died with its process comes once more to be dead-lettered
// instead of being dropped.
func checkUnlimitedDeliveries(c jetstream.Consumer, spec manifest.FunctionSpec) error {
	if n := c.CachedInfo().Config.MaxDeliver; n > 0 {
		return fmt.Errorf("%w: consumer %s has max_deliver %d on the server; jetfn counts maxDeliver (%d) itself "+
			"and needs the server's unlimited (-1), or a message whose last delivery died with its process is "+
			"dropped: `nats consumer edit %s %s --max-deliver=-1`",
			ErrServerRefused, spec.Durable, n, spec.MaxDeliver, spec.Stream, spec.Durable)
	}
	return nil
}

// checkPendingBound refuses, without provisioning, a consumer whose
// limit of messages pending is what keeps a key's messages in order (a
// partition's, a debouncer's: spec's MaxAckPending) and is another on
// the server: more pending at once would let them overtake each other.
// Other consumers' limits are the operator's to tune.
func checkPendingBound(c jetstream.Consumer, spec manifest.FunctionSpec) error {
	if n := c.CachedInfo().Config.MaxAckPending; n != spec.MaxAckPending {
		return fmt.Errorf("%w: consumer %s has max_ack_pending %d on the server; jetfn needs %d, or a key's messages "+
			"can overtake each other: `nats consumer edit %s %s --max-pending=%d`",
			ErrServerRefused, spec.Durable, n, spec.MaxAckPending, spec.Stream, spec.Durable, spec.MaxAckPending)
	}
	return nil
}
