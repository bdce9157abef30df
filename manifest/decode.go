package manifest

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder fills a Manifest from its YAML tree key by key, the way yaml.v3's
// strict Decode would, except that it does not stop at the first surprise:
// every unknown or repeated key and every value of the wrong kind becomes a
// Problem with its line, and everything else is decoded, so Validate can
// still run and report the rest in the same round.
type decoder struct {
	m        *Manifest
	problems []error
}

// decode walks node into out (settable), whose place in the manifest is at.
func (d *decoder) decode(node *yaml.Node, out reflect.Value, at place) {
	if node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	if isNull(node) {
		return // an empty value leaves the field absent, as yaml.v3 does
	}
	if u, ok := out.Addr().Interface().(yaml.Unmarshaler); ok {
		if err := u.UnmarshalYAML(node); err != nil {
			d.add(at, node.Line, err)
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
	default:
		d.decodeScalar(node, out, at)
	}
}

func (d *decoder) decodeStruct(node *yaml.Node, out reflect.Value, at place) {
	if node.Kind != yaml.MappingNode {
		d.add(at, node.Line, fmt.Errorf("want keys and values (key: value), not %s", kindOf(node)))
		return
	}
	keys := yamlKeys(out.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i], node.Content[i+1]
		kat := at.key(key.Value)
		if first, dup := seen[key.Value]; dup {
			d.add(kat, key.Line, fmt.Errorf("also set at line %d", first))
			continue
		}
		seen[key.Value] = key.Line
		field, ok := keys[key.Value]
		if !ok {
			d.add(kat, key.Line, unknownKey(key.Value, keys))
			continue
		}
		d.decode(val, out.FieldByIndex(field.Index), kat)
	}
}

func (d *decoder) decodeSlice(node *yaml.Node, out reflect.Value, at place) {
	if node.Kind != yaml.SequenceNode {
		d.add(at, node.Line, fmt.Errorf("want a list, not %s", kindOf(node)))
		return
	}
	items := reflect.MakeSlice(out.Type(), len(node.Content), len(node.Content))
	for i, item := range node.Content {
		d.decode(item, items.Index(i), at.index(i, nameOf(item)))
	}
	out.Set(items)
}

// decodeScalar decodes one value with yaml.v3, and says what is wrong in
// manifest terms: no Go type names, and a unit for a bare number where a
// duration belongs.
func (d *decoder) decodeScalar(node *yaml.Node, out reflect.Value, at place) {
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

func (d *decoder) add(at place, line int, err error) {
	d.problems = append(d.problems, d.m.problemAt(at, line, err))
}

var durationType = reflect.TypeFor[time.Duration]()

// parseDuration reads a Go duration. A bare number is refused with the
// unit it needs, so `ackWait: 6` reads "durations need a unit: 6s"; the
// JSON Schema refuses it too.
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

// describe says what a Go type accepts, in manifest words.
func describe(t reflect.Type) string {
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

func quote(s string) string {
	if s == "" || strings.ContainsAny(s, " :#\t") {
		return strconv.Quote(s)
	}
	return s
}

// yamlKeys maps each key a struct takes to its field, from the yaml tags.
func yamlKeys(t reflect.Type) map[string]reflect.StructField {
	keys := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		keys[name] = f
	}
	return keys
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

// errNotYAML is the manifest's text failing to parse as YAML at all; every
// other problem waits until it parses.
var errNotYAML = errors.New("not valid YAML")
