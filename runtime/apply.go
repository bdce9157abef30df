package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// ErrRefusedManifest is returned by Apply for a manifest revision that the
// runtime will not run: it keeps running the previous one.
var ErrRefusedManifest = errors.New("manifest refused; the previous one keeps running")

// Apply switches a running runtime (after Ready) to manifest m without a
// restart: it updates the streams, binds added functions, re-creates the
// binding of each changed function by draining only that function while
// the others keep running, and drains and unbinds removed ones (their
// durable consumers stay). A manifest that fails validation, names a
// function this binary does not have, or that the server refuses, is
// refused: the previous manifest keeps running, and every function's status
// shows the refusal until a later manifest applies.
func (r *Runtime) Apply(ctx context.Context, m *Manifest) error {
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
	m, err := ParseManifest(raw)
	if err != nil {
		r.applying.Lock()
		defer r.applying.Unlock()
		return r.refuse(m, err)
	}
	return r.Apply(ctx, m)
}

// refuse records why a manifest was refused; the caller holds applying.
func (r *Runtime) refuse(m *Manifest, err error) error {
	note := err.Error()
	r.refusal.Store(&note)
	digest := ""
	if m != nil {
		digest = m.Digest
	}
	r.opts.log.Error("refused manifest revision", "manifest_digest", digest, "err", err)
	return fmt.Errorf("%w: %w", ErrRefusedManifest, err)
}

func (r *Runtime) apply(ctx context.Context, m *Manifest) error {
	if r.stopped {
		return errors.New("the runtime is shutting down")
	}
	if err := m.Validate(r.knownNames()); err != nil {
		return err
	}
	if err := m.CheckDuplicateWindows(); err != nil && !r.opts.allowShortWindow {
		return err
	}
	old := r.currentManifest()
	plan := PlanChange(old, m)
	if err := r.provisionStreams(ctx, m); err != nil {
		return err
	}
	for _, name := range plan.Removed {
		r.deactivate(name)
		if r.opts.prune {
			r.pruneConsumer(ctx, old, name)
		}
	}
	for _, spec := range m.Functions {
		if err := r.applyFunction(ctx, spec, m, plan); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.manifest = m
	r.mu.Unlock()
	r.opts.log.Info("applied manifest revision", "manifest_digest", m.Digest, "plan", plan.String())
	return nil
}

// applyFunction binds an added function, or re-binds a changed one: the
// new binding starts first, so a change the server refuses leaves the old
// one running; then the old one drains (in-flight handlers finish,
// buffered messages go back) while the new one already pulls, like a
// second instance would.
func (r *Runtime) applyFunction(ctx context.Context, spec FunctionSpec, m *Manifest, plan Plan) error {
	added := slices.Contains(plan.Added, spec.Name)
	changed := slices.ContainsFunc(plan.Changed, func(c Change) bool { return c.Name == spec.Name })
	if !added && !changed {
		return nil
	}
	old := r.find(spec.Name)
	a, err := r.activate(ctx, spec, m)
	if err != nil {
		return fmt.Errorf("binding %s: %w", spec.Name, err)
	}
	r.mu.Lock()
	r.active = append(r.active, a)
	r.mu.Unlock()
	if old != nil {
		r.remove(old)
	}
	return nil
}

// deactivate drains and unbinds one function.
func (r *Runtime) deactivate(name string) {
	if a := r.find(name); a != nil {
		r.remove(a)
	}
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

// remove takes a out of service and drains it.
func (r *Runtime) remove(a *active) {
	r.mu.Lock()
	r.active = slices.DeleteFunc(r.active, func(x *active) bool { return x == a })
	r.mu.Unlock()
	a.stop()
}

func (r *Runtime) knownNames() []string {
	names := make([]string, 0, len(r.functions))
	for n := range r.functions {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// pruneConsumer deletes a removed function's durable consumer. A failure is
// logged, not fatal: the function is already unbound.
func (r *Runtime) pruneConsumer(ctx context.Context, old *Manifest, name string) {
	spec, ok := old.function(name)
	if !ok {
		return
	}
	if err := r.js.DeleteConsumer(ctx, spec.Stream, spec.Durable); err != nil {
		r.opts.log.Warn("pruning a removed function's consumer", "function", name, "err", err)
		return
	}
	r.opts.log.Info("pruned a removed function's consumer", "function", name, "consumer", spec.Durable)
}
