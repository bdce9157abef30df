package runtime

import (
	"testing"

	"github.com/jetfn/jetfn/wire"
)

// statsOf returns the live counters of a bound function.
func (r *Runtime) statsOf(t *testing.T, name string) wire.Stats {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.active {
		if a.b.spec.Name == name {
			return a.b.stats.snapshot(name)
		}
	}
	t.Fatalf("function %s is not bound", name)
	return wire.Stats{}
}

// bindingOf returns a bound function's binding.
func (r *Runtime) bindingOf(t *testing.T, name string) *binding {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.active {
		if a.b.spec.Name == name {
			return a.b
		}
	}
	t.Fatalf("function %s is not bound", name)
	return nil
}
