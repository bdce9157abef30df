// Package yamldecode is jetfn's one YAML decoder: the manifest and every
// function's config block are read with it, so a typo or a value of the
// wrong kind reads the same in both, with its key and its line.
//
// It decodes key by key, the way yaml.v3's strict Decode would, except that
// it does not stop at the first surprise: every unknown or repeated key and
// every value of the wrong kind becomes a Problem, and everything else is
// decoded, so a caller's own checks can still run and report the rest in
// the same round. yaml.v3's Node.Decode has no KnownFields; walking the
// tree is also what lets a problem name its key.
package yamldecode

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ErrUnknownKey is a key no field takes.
var ErrUnknownKey = errors.New("unknown key")

// Problem is one thing wrong at one place, on its 1-based line.
type Problem struct {
	Place
	Line int
	Err  error
}

// Place is where a key is: Label is the key as a person reads it
// ("functions[0] (summarize-session).ackWait", "retry.max"; empty for the
// value decoded as a whole), Path the keys and list indexes that lead to
// it in the YAML tree.
type Place struct {
	Label string
	Path  []any
}

// Decode fills out (settable) from node and returns every problem. Fields
// absent from node keep the values out already has, which is how a caller
// supplies defaults; a null value leaves its field absent too.
//
// Keys are a struct's yaml tags, or lowercased field names as yaml.v3 has
// them; `,inline` structs are flattened; yaml:"-" fields take no key.
// Pointers are allocated, lists decoded item by item, durations need a unit
// (6s, not 6). A type with its own UnmarshalYAML decodes itself, and a map
// is decoded by yaml.v3 without a key check.
func Decode(node *yaml.Node, out reflect.Value) []Problem {
	var d decoder
	d.decode(node, out, Place{})
	return d.problems
}

type decoder struct {
	problems []Problem
}

// Key is the key k inside p.
func (p Place) Key(k string) Place {
	label := k
	if p.Label != "" {
		label = p.Label + "." + k
	}
	return Place{Label: label, Path: append(slices.Clone(p.Path), k)}
}

// Index is item i of the list at p, named by its name: key when it has one.
func (p Place) Index(i int, name string) Place {
	label := fmt.Sprintf("%s[%d]", p.Label, i)
	if name != "" {
		label += " (" + name + ")"
	}
	return Place{Label: label, Path: append(slices.Clone(p.Path), i)}
}

// Labelled keeps p's path but reads as label, for a problem between
// entries, such as two streams whose subjects overlap.
func (p Place) Labelled(label string) Place { return Place{Label: label, Path: p.Path} }

func (d *decoder) add(at Place, line int, err error) {
	d.problems = append(d.problems, Problem{Place: at, Line: line, Err: err})
}

// decode walks node into out, whose place is at.
func (d *decoder) decode(node *yaml.Node, out reflect.Value, at Place) {
	if node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	if isNull(node) {
		return
	}
	if u, ok := out.Addr().Interface().(yaml.Unmarshaler); ok {
		if err := u.UnmarshalYAML(node); err != nil {
			d.add(at, node.Line, err)
		}
		return
	}
	if decodesAsYAMLDoes(out) {
		if err := node.Decode(out.Addr().Interface()); err != nil {
			d.add(at, node.Line, fmt.Errorf("%s: %w", quote(node.Value), err))
		}
		return
	}
	switch out.Kind() {
	case reflect.Pointer:
		if out.IsNil() {
			out.Set(reflect.New(out.Type().Elem()))
		}
		d.decode(node, out.Elem(), at)
	case reflect.Struct:
		d.decodeStruct(node, out, at)
	case reflect.Slice:
		d.decodeSlice(node, out, at)
	case reflect.Map:
		d.decodeMap(node, out, at)
	default:
		d.decodeScalar(node, out, at)
	}
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// decodesAsYAMLDoes reports whether out is left to yaml.v3 whole: a type
// that reads itself from text (time.Time, netip.Addr), an interface
// (any takes whatever the YAML holds) or a fixed-size array.
func decodesAsYAMLDoes(out reflect.Value) bool {
	k := out.Kind()
	return k == reflect.Interface || k == reflect.Array || out.Addr().Type().Implements(textUnmarshaler)
}

func (d *decoder) decodeStruct(node *yaml.Node, out reflect.Value, at Place) {
	if node.Kind != yaml.MappingNode {
		d.add(at, node.Line, fmt.Errorf("want keys and values (key: value), not %s", kindOf(node)))
		return
	}
	fields := fieldsOf(out.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i], node.Content[i+1]
		kat := at.Key(key.Value)
		if first, dup := seen[key.Value]; dup {
			d.add(kat, key.Line, fmt.Errorf("also set at line %d", first))
			continue
		}
		seen[key.Value] = key.Line
		index, ok := fields[key.Value]
		if !ok {
			d.add(kat, key.Line, unknownKey(key.Value, fields))
			continue
		}
		d.decode(val, out.FieldByIndex(index), kat)
	}
}

func (d *decoder) decodeSlice(node *yaml.Node, out reflect.Value, at Place) {
	if node.Kind != yaml.SequenceNode {
		d.add(at, node.Line, fmt.Errorf("want a list, not %s", kindOf(node)))
		return
	}
	items := reflect.MakeSlice(out.Type(), len(node.Content), len(node.Content))
	for i, item := range node.Content {
		d.decode(item, items.Index(i), at.Index(i, nameOf(item)))
	}
	out.Set(items)
}

// decodeMap leaves a map's keys to yaml.v3: they are the author's, not
// fields with names to check.
func (d *decoder) decodeMap(node *yaml.Node, out reflect.Value, at Place) {
	if node.Kind != yaml.MappingNode {
		d.add(at, node.Line, fmt.Errorf("want keys and values (key: value), not %s", kindOf(node)))
		return
	}
	if err := node.Decode(out.Addr().Interface()); err != nil {
		d.add(at, node.Line, fmt.Errorf("want keys and values whose values are %s", describe(out.Type().Elem())))
	}
}

// decodeScalar decodes one value with yaml.v3, and says what is wrong in a
// reader's terms: no Go type names, and a unit for a bare number where a
// duration belongs.
func (d *decoder) decodeScalar(node *yaml.Node, out reflect.Value, at Place) {
	if node.Kind != yaml.ScalarNode {
		d.add(at, node.Line, fmt.Errorf("want %s, not %s", describe(out.Type()), kindOf(node)))
		return
	}
	if out.Type() == durationType {
		dur, err := parseDuration(node)
		if err != nil {
			d.add(at, node.Line, err)
			return
		}
		out.SetInt(int64(dur))
		return
	}
	if err := node.Decode(out.Addr().Interface()); err != nil {
		d.add(at, node.Line, fmt.Errorf("%s is not %s", quote(node.Value), describe(out.Type())))
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// parseDuration reads a Go duration. A bare number is refused with the
// unit it needs, so `ackWait: 6` reads "durations need a unit: 6s".
func parseDuration(node *yaml.Node) (time.Duration, error) {
	if node.Tag == "!!int" || node.Tag == "!!float" {
		return 0, fmt.Errorf("%s has no unit; durations need a unit: %ss", node.Value, node.Value)
	}
	dur, err := time.ParseDuration(node.Value)
	if err != nil {
		return 0, fmt.Errorf("%s is not a duration such as 500ms, 6s, 2m or 24h", quote(node.Value))
	}
	return dur, nil
}

func isNull(node *yaml.Node) bool {
	return node.Kind == yaml.ScalarNode && node.Tag == "!!null"
}

// kindOf names what a node holds, for "want X, not Y".
func kindOf(node *yaml.Node) string {
	switch node.Kind {
	case yaml.MappingNode:
		return "keys and values"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "the single value " + quote(node.Value)
	}
}

// describe says what a Go type accepts, in a reader's words.
func describe(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 500ms, 6s, 2m or 24h"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a single value"
	case reflect.Slice:
		return "a list"
	case reflect.Pointer:
		return describe(t.Elem())
	default:
		return "keys and values (key: value)"
	}
}

// quote quotes a value only where it would not read as one word.
func quote(s string) string {
	if s == "" || strings.ContainsAny(s, " :#\t") {
		return strconv.Quote(s)
	}
	return s
}

// fieldsOf maps each key a struct takes to its field's index path, the way
// yaml.v3 names them: the tag, else the lowercased field name; `,inline`
// structs contribute their own keys.
func fieldsOf(t reflect.Type) map[string][]int {
	fields := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		inline := strings.Contains(opts, "inline")
		switch {
		case name == "-":
		case inline && f.Type.Kind() == reflect.Struct:
			for key, index := range fieldsOf(f.Type) {
				fields[key] = append([]int{i}, index...)
			}
		case !f.IsExported() || inline:
		case name == "":
			fields[strings.ToLower(f.Name)] = []int{i}
		default:
			fields[name] = []int{i}
		}
	}
	return fields
}

// unknownKey says that no field takes key, naming the key the author most
// likely meant, or else the keys there are.
func unknownKey(key string, fields map[string][]int) error {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	slices.Sort(known)
	switch best := Closest(key, known); {
	case best != "":
		return fmt.Errorf("%w; did you mean %s?", ErrUnknownKey, best)
	case len(known) == 0:
		return fmt.Errorf("%w; this block takes no keys", ErrUnknownKey)
	default:
		return fmt.Errorf("%w; the keys here are %s", ErrUnknownKey, strings.Join(known, ", "))
	}
}

// nameOf is the name: of a list item, for labels like "functions[0]
// (summarize-session)"; empty when the item has none.
func nameOf(item *yaml.Node) string {
	if item.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(item.Content); i += 2 {
		if k, v := item.Content[i], item.Content[i+1]; k.Value == "name" && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}
