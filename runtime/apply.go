package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// ErrRefusedManifest is returned by Apply for a manifest revision that the
// runtime will not run: it keeps running the previous one.
var ErrRefusedManifest = errors.New("manifest refused; the previous one keeps running")

// ErrRevisionInvalid marks a refusal that applying the same revision again
// cannot mend: the manifest is invalid, a config check or constructor
// failed, or the server refuses a change it makes. Any other refusal (an
// API timeout, an outage, a consumer an administrator has yet to create)
// may pass on a later try.
var ErrRevisionInvalid = errors.New("the revision itself is refused")

// invalidRevision marks err as ErrRevisionInvalid without changing its text.
type invalidRevision struct{ error }

func (e invalidRevision) Unwrap() error        { return e.error }
func (e invalidRevision) Is(target error) bool { return target == ErrRevisionInvalid }

// classify marks err as ErrRevisionInvalid when the server refused the
// change itself.
func classify(err error) error {
	if errors.Is(err, ErrServerRefused) {
		return invalidRevision{err}
	}
	return err
}

// Apply switches a running runtime (after Ready) to manifest m without a
// restart: it updates the streams, binds added functions, re-creates the
// binding of each changed function (the new binding starts, then the old
// one drains) while the others keep running, and drains and unbinds
// removed ones (their durable consumers stay unless WithPrune).
//
// It applies all of m or none of it. A manifest that fails validation or a
// function's config check, names a function this binary does not have, has
// a constructor that fails, or that the server would refuse, is refused
// before any running function is touched; a consumer update that fails
// half-way stops what this Apply started and puts the consumers back. The
// previous manifest keeps running, and every function's status shows the
// refusal until a later manifest applies.
func (r *Runtime) Apply(ctx context.Context, m *manifest.Manifest) error {
	r.applying.Lock()
	defer r.applying.Unlock()
	if err := r.apply(ctx, m); err != nil {
		return r.refuse(m, err)
	}
	r.refusal.Store(nil)
	return nil
}

// ApplyYAML parses raw and applies it; a manifest that does not parse is
// refused like one that does not validate.
func (r *Runtime) ApplyYAML(ctx context.Context, raw []byte) error {
	m, err := manifest.Parse(raw)
	if err != nil {
		r.applying.Lock()
		defer r.applying.Unlock()
		return r.refuse(m, invalidRevision{err})
	}
	return r.Apply(ctx, m)
}

// refuse records why a manifest was refused; the caller holds applying.
func (r *Runtime) refuse(m *manifest.Manifest, err error) error {
	r.tightenForRefused(m)
	note := err.Error()
	r.refusal.Store(&note)
	digest := ""
	if m != nil {
		digest = m.Digest
	}
	r.opts.log.Error("refused manifest revision", "manifest_digest", digest, "err", err)
	return fmt.Errorf("%w: %w", ErrRefusedManifest, err)
}

// tightenForRefused lowers the heartbeat of each running function to the
// refused revision's, where that is lower: other instances may apply the
// revision, and with it a lower ackWait on the shared consumer, and this
// instance's long handlers must not be redelivered while they run.
func (r *Runtime) tightenForRefused(m *manifest.Manifest) {
	if m == nil {
		return
	}
	for _, f := range m.Functions {
		if a := r.find(f.Name); a != nil && f.Heartbeat > 0 {
			a.b.tightenHeartbeat(min(f.Heartbeat, f.AckWait/2))
		}
	}
}

func (r *Runtime) apply(ctx context.Context, m *manifest.Manifest) error {
	if r.stopped {
		return errors.New("the runtime is shutting down")
	}
	if err := r.check(m); err != nil {
		return invalidRevision{err}
	}
	old := r.currentManifest()
	plan := manifest.PlanChange(old, m)
	// Everything that can fail before anything changes: every new handler,
	// and what the server would refuse.
	next, err := r.prepareAll(m, plan.Touched(m))
	if err != nil {
		return invalidRevision{err}
	}
	if err := r.serverRefusals(ctx, m); err != nil {
		closeHandlers(next)
		return classify(err)
	}
	if err := r.provisionStreams(ctx, m); err != nil {
		closeHandlers(next)
		return classify(err)
	}
	started, err := r.startAll(ctx, next, m)
	if err != nil {
		r.rollBack(started)
		closeHandlers(next[len(started):])
		return classify(err)
	}
	r.retire(ctx, old, m, plan, started)
	r.mu.Lock()
	r.manifest = m
	r.mu.Unlock()
	r.deployed.setDigest(m.Digest)
	r.opts.log.Info("applied manifest revision", "manifest_digest", m.Digest, "plan", plan.String())
	return nil
}

// serverRefusals is what the server would refuse of m's stream changes.
// Without provisioning the runtime changes no stream, so there is nothing
// to ask (and no right to look up streams it only publishes to).
func (r *Runtime) serverRefusals(ctx context.Context, m *manifest.Manifest) error {
	if r.opts.noProvision {
		return nil
	}
	refusals, err := ServerRefusals(ctx, r.js, m)
	if err != nil {
		return err
	}
	if len(refusals) > 0 {
		return fmt.Errorf("%w: %s", ErrServerRefused, strings.Join(refusals, "; "))
	}
	return nil
}

// check validates m as Run's New did.
func (r *Runtime) check(m *manifest.Manifest) error {
	if err := m.Validate(r.knownNames()); err != nil {
		return err
	}
	if err := manifest.CheckConfigs(m, r.registry); err != nil {
		return err
	}
	if err := m.CheckDuplicateWindows(); err != nil && !r.opts.allowShortWindow {
		return err
	}
	return nil
}

// prepareAll constructs every binding of specs, or none: when one
// constructor fails, the handlers already built are closed.
func (r *Runtime) prepareAll(m *manifest.Manifest, specs []manifest.FunctionSpec) ([]*binding, error) {
	var out []*binding
	var errs []error
	for _, spec := range specs {
		b, err := r.prepare(spec, m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, b)
	}
	if len(errs) > 0 {
		closeHandlers(out)
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// startAll starts the new bindings next to the running ones, as a second
// instance would. Before a changed function's consumer is updated, the
// running binding's heartbeat is tightened to the new one, so a lower
// ackWait does not get its in-flight messages redelivered.
func (r *Runtime) startAll(ctx context.Context, next []*binding, m *manifest.Manifest) ([]*active, error) {
	var started []*active
	for _, b := range next {
		if old := r.find(b.spec.Name); old != nil {
			old.b.tightenHeartbeat(b.spec.Heartbeat)
		}
		a, err := r.activate(ctx, b, m)
		if err != nil {
			return started, fmt.Errorf("binding %s: %w", b.spec.Name, err)
		}
		started = append(started, a)
	}
	return started, nil
}

// rollBack stops the bindings an Apply started, so a refused revision
// leaves every function running as it was. The consumers it updated keep
// the revision's settings: the revision stays the deployment's current
// one, another instance may have applied it, and this one retries it
// (deploy.Follow); the running bindings' heartbeats follow the consumers'
// ackWait (tightenForRefused, and the consumer watch). Stream updates
// already made stay too: they are in place and keep every message.
func (r *Runtime) rollBack(started []*active) {
	stopConcurrently(started)
}

// retire takes out of service, all at once, the functions the new manifest
// removes and the old bindings of those it replaced, so their drains run
// side by side: a shutdown waiting on this Apply waits one drain timeout,
// not one per function.
func (r *Runtime) retire(ctx context.Context, old, m *manifest.Manifest, plan manifest.Plan, started []*active) {
	var out []*active
	for _, name := range plan.Removed {
		if a := r.find(name); a != nil {
			if lineageContinues(a, started) {
				a.b.consumer.handedOver.Store(true)
			}
			out = append(out, a)
		}
	}
	for _, a := range started {
		if prev := r.find(a.b.spec.Name); prev != nil {
			if prev.b.spec.Durable != a.b.spec.Durable && prev.b.consumer != nil {
				prev.b.consumer.handedOver.Store(true)
			}
			out = append(out, prev)
		}
	}
	r.mu.Lock()
	r.active = slices.DeleteFunc(r.active, func(x *active) bool { return slices.Contains(out, x) })
	r.active = append(r.active, started...)
	r.mu.Unlock()
	r.probeRemotesNow() // the started bindings are active now: the probe finds them
	stopConcurrently(out)
	r.pruneDebouncePartitions(ctx, m)
	if r.opts.prune {
		for _, name := range plan.Removed {
			r.pruneConsumer(ctx, old, m, name)
		}
	}
}

// lineageContinues reports whether one of started carries removed's scope
// on another durable of its stream: a rename, whose new name records the
// lineage's position from now on (positions.go, lineageKey), and whose
// record the old name's last one must not overwrite.
func lineageContinues(removed *active, started []*active) bool {
	return removed.b.consumer != nil && slices.ContainsFunc(started, func(s *active) bool {
		return s.b.spec.Stream == removed.b.spec.Stream && s.b.spec.Durable != removed.b.spec.Durable &&
			s.b.scope.get() == removed.b.scope.get()
	})
}

// stopConcurrently drains every one of all at once.
func stopConcurrently(all []*active) {
	var wg sync.WaitGroup
	for _, a := range all {
		wg.Go(a.stop)
	}
	wg.Wait()
}

func (r *Runtime) find(name string) *active {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.active, func(a *active) bool { return a.b.spec.Name == name })
	if i < 0 {
		return nil
	}
	return r.active[i]
}

func (r *Runtime) knownNames() []string {
	return slices.Sorted(maps.Keys(r.functions))
}

// pruneHelperStream removes what a removed keyed or debounced function
// kept beside its input: feeder, its consumer on the input (none when
// empty), and the stream that consumer filled, whose own consumers go with
// it. Left, the feeder would go on copying the input for no one.
func (r *Runtime) pruneHelperStream(ctx context.Context, spec manifest.FunctionSpec, feeder, stream, kind string) {
	log := r.opts.log.With("function", spec.Name)
	if feeder != "" {
		if err := r.js.DeleteConsumer(ctx, spec.Stream, feeder); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			log.Warn("pruning a removed function's consumer", "consumer", feeder, "err", err)
		}
	}
	if err := r.js.DeleteStream(ctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		log.Warn("pruning a removed function's "+kind+" stream", "err", err)
		return
	}
	log.Info("pruned a removed function's "+kind+" stream and its consumers", "stream", stream)
}

// pruneConsumer deletes a removed function's durable consumer, and its
// schedule unless a function of the new manifest m schedules the same
// subject. A failure is logged, not fatal: the function is already unbound.
func (r *Runtime) pruneConsumer(ctx context.Context, old, m *manifest.Manifest, name string) {
	spec, ok := old.Function(name)
	if !ok {
		return
	}
	if spec.IsKeyed() {
		feeder := "" // a token key's keyed stream sources the input itself
		if spec.IsRouted() {
			feeder = spec.RouterDurable()
		}
		r.recordKeyedFloor(ctx, spec)
		r.pruneHelperStream(ctx, spec, feeder, spec.KeyedStreamName(), "keyed")
		return
	}
	if spec.IsDebounced() {
		r.pruneHelperStream(ctx, spec, spec.DebouncerDurable(), spec.DebounceStreamName(), "debounce")
		return
	}
	if spec.Schedule != nil && !m.Schedules(spec.Stream, spec.Subject) {
		r.pruneSchedule(ctx, spec)
	}
	if err := r.js.DeleteConsumer(ctx, spec.Stream, spec.Durable); err != nil {
		r.opts.log.Warn("pruning a removed function's consumer", "function", name, "err", err)
		return
	}
	r.opts.log.Info("pruned a removed function's consumer", "function", name, "consumer", spec.Durable)
}
