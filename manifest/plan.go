package manifest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/jetfn/jetfn"
)

// Plan is what switching from one manifest to another changes.
type Plan struct {
	Added   []string
	Removed []string
	Changed []Change
	// Streams whose declaration is new or differs; whether the server
	// accepts the change is ServerRefusals' question.
	StreamsCreated []string
	StreamsUpdated []Change
}

// Change is one function or stream whose declaration differs, with the
// manifest keys that differ.
type Change struct {
	Name   string
	Fields []string
}

// PlanChange compares two manifests; old may be nil (nothing deployed yet).
func PlanChange(old, next *Manifest) Plan {
	if old == nil {
		old = &Manifest{}
	}
	var p Plan
	p.Added, p.Changed = diffNamed(next.Functions, old.Function, func(f FunctionSpec) string { return f.Name })
	for _, f := range old.Functions {
		if _, ok := next.Function(f.Name); !ok {
			p.Removed = append(p.Removed, f.Name)
		}
	}
	p.StreamsCreated, p.StreamsUpdated = diffNamed(next.Streams, old.Stream, func(s StreamSpec) string { return s.Name })
	return p
}

// diffNamed compares each of next with the entry of the same name that
// prev finds: those it does not find are added, the others changed where
// their keys differ.
func diffNamed[T any](next []T, prev func(name string) (T, bool), name func(T) string) (added []string, changed []Change) {
	for _, e := range next {
		old, ok := prev(name(e))
		if !ok {
			added = append(added, name(e))
			continue
		}
		if fields := fieldDiff(old, e); len(fields) > 0 {
			changed = append(changed, Change{Name: name(e), Fields: fields})
		}
	}
	return added, changed
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool {
	return len(p.Added)+len(p.Removed)+len(p.Changed)+len(p.StreamsCreated)+len(p.StreamsUpdated) == 0
}

func (p Plan) String() string {
	if p.Empty() {
		return "no changes\n"
	}
	var b strings.Builder
	for _, n := range p.Added {
		fmt.Fprintf(&b, "+ function %s\n", n)
	}
	for _, c := range p.Changed {
		fmt.Fprintf(&b, "~ function %s: %s\n", c.Name, strings.Join(c.Fields, ", "))
	}
	for _, n := range p.Removed {
		fmt.Fprintf(&b, "- function %s (its durable consumer stays)\n", n)
	}
	for _, n := range p.StreamsCreated {
		fmt.Fprintf(&b, "+ stream %s\n", n)
	}
	for _, c := range p.StreamsUpdated {
		fmt.Fprintf(&b, "~ stream %s: %s\n", c.Name, strings.Join(c.Fields, ", "))
	}
	return b.String()
}

// Function is the entry that binds the named function, if m has one.
func (m *Manifest) Function(name string) (FunctionSpec, bool) {
	i := slices.IndexFunc(m.Functions, func(f FunctionSpec) bool { return f.Name == name })
	if i < 0 {
		return FunctionSpec{}, false
	}
	return m.Functions[i], true
}

// fieldDiff names the yaml keys whose values differ between two specs of
// the same type. A config block is compared by its content, not its layout.
func fieldDiff[T any](a, b T) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var fields []string
	for i := range va.NumField() {
		f := va.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		x, y := va.Field(i).Interface(), vb.Field(i).Interface()
		if cx, ok := x.(jetfn.Config); ok {
			if !cx.Equal(y.(jetfn.Config)) {
				fields = append(fields, name)
			}
			continue
		}
		if !reflect.DeepEqual(x, y) {
			fields = append(fields, name)
		}
	}
	return fields
}

// Touched lists the functions of next that a switch adds or changes.
func (p Plan) Touched(next *Manifest) []FunctionSpec {
	var out []FunctionSpec
	for _, spec := range next.Functions {
		if slices.Contains(p.Added, spec.Name) ||
			slices.ContainsFunc(p.Changed, func(c Change) bool { return c.Name == spec.Name }) {
			out = append(out, spec)
		}
	}
	return out
}
