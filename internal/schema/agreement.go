package schema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// checkAgreement reports every way t's JSON fields and the schema's
// properties differ, so that the schema states every rule and the Go type
// cannot hold what the schema forbids nor miss what it names.
func checkAgreement(t reflect.Type, s *jsonschema.Schema) error {
	a := agreement{inside: map[reflect.Type]bool{}}
	a.agree(t, s, "", true)
	errs := a.errs
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("payload type %s disagrees with its schema: %s", t, strings.Join(errs, "; "))
}

// agreement gathers the mismatches of one type and schema.
type agreement struct {
	errs []string
	// inside holds the struct types being compared, so a type that holds
	// itself is compared once.
	inside map[reflect.Type]bool
}

func (a *agreement) add(format string, args ...any) {
	a.errs = append(a.errs, fmt.Sprintf(format, args...))
}

// agree compares t with s at path (a Go-side description for the error).
// The root's fields are compared even when it decodes itself, as events
// with a catch-all for unknown members do.
func (a *agreement) agree(t reflect.Type, s *jsonschema.Schema, path string, root bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	fieldsDecoded := t.Kind() == reflect.Struct && (root || !decodesOwnJSON(t))
	have, want := goTypes(t), schemaTypes(s)
	if fieldsDecoded {
		have = typeObject
	}
	if !have.holds(want) {
		a.add("%sthe schema allows %s, which %s cannot hold", prefix(path), want, t)
	}
	if !fieldsDecoded {
		if t.Kind() == reflect.Slice && !decodesOwnJSON(t) {
			if items := itemsOf(s); items != nil {
				a.agree(t.Elem(), items, path+"[]", false)
			}
		}
		return
	}
	if a.inside[t] {
		return
	}
	a.inside[t] = true
	defer delete(a.inside, t)
	props := propertiesOf(s)
	fields := jsonFields(t)
	for _, name := range slices.Sorted(maps.Keys(props)) {
		f, ok := fields[name]
		if !ok {
			a.add("%sthe schema's property %q is no field of %s", prefix(path), name, t)
			continue
		}
		a.agree(f.Type, allOf(props[name]), joinField(path, fmt.Sprintf("%s (%q)", f.Name, name)), false)
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if _, ok := props[name]; !ok {
			a.add("%sfield %s (%q) is no property of the schema", prefix(path), fields[name].Name, name)
		}
	}
	for _, name := range schemaRequired(s) {
		if _, ok := props[name]; !ok {
			if _, ok := fields[name]; !ok {
				a.add("%sthe schema requires %q, which is no field of %s", prefix(path), name, t)
			}
		}
	}
}

func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// constraints is s with every schema that constrains the same value
// unconditionally or, for then and else, under a condition: its $ref
// chain, allOf, then and else. An if only selects, so it is left out.
func constraints(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	var walk func(*jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s)
		walk(s.Ref)
		for _, sub := range s.AllOf {
			walk(sub)
		}
		walk(s.Then)
		walk(s.Else)
	}
	walk(s)
	return out
}

// allOf is one schema standing for several that constrain the same value.
func allOf(ss []*jsonschema.Schema) *jsonschema.Schema {
	if len(ss) == 1 {
		return ss[0]
	}
	return &jsonschema.Schema{AllOf: ss}
}

// propertiesOf is every property s and its constraints name.
func propertiesOf(s *jsonschema.Schema) map[string][]*jsonschema.Schema {
	props := map[string][]*jsonschema.Schema{}
	for _, c := range constraints(s) {
		for name, ps := range c.Properties {
			props[name] = append(props[name], ps)
		}
	}
	return props
}

func schemaRequired(s *jsonschema.Schema) []string {
	var names []string
	for _, c := range constraints(s) {
		names = append(names, c.Required...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func itemsOf(s *jsonschema.Schema) *jsonschema.Schema {
	for _, c := range constraints(s) {
		if c.Items2020 != nil {
			return c.Items2020
		}
		if items, ok := c.Items.(*jsonschema.Schema); ok {
			return items
		}
	}
	return nil
}

// field is one JSON member a struct decodes.
type field struct {
	Name string // the Go field's
	Type reflect.Type
}

// jsonFields lists the members json v2 decodes into t, by JSON name:
// exported fields named by their tag or else by their Go name, with
// embedded structs (Go embedding or the `embed` option) flattened. An
// embedded map or jsontext.Value, the catch-all for unknown members, names
// none.
func jsonFields(t reflect.Type) map[string]field {
	fields := map[string]field{}
	for sf := range t.Fields() {
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		embed := slices.Contains(strings.Split(opts, ","), "embed") || (sf.Anonymous && name == "")
		switch {
		case embed && ft.Kind() == reflect.Struct:
			maps.Copy(fields, jsonFields(ft))
		case embed, !sf.IsExported():
		default:
			if name == "" {
				name = sf.Name
			}
			fields[strings.Trim(name, "'")] = field{Name: sf.Name, Type: sf.Type}
		}
	}
	return fields
}

// decodesOwnJSON reports a type with its own JSON or text decoding,
// whose JSON shape reflection cannot see.
func decodesOwnJSON(t reflect.Type) bool {
	return implements(t, jsonDecoders...) || implements(t, textDecoder)
}

func implements(t reflect.Type, ifaces ...reflect.Type) bool {
	for _, iface := range ifaces {
		if t.Implements(iface) || reflect.PointerTo(t).Implements(iface) {
			return true
		}
	}
	return false
}

var (
	jsonDecoders = []reflect.Type{reflect.TypeFor[jsonv2.UnmarshalerFrom](), reflect.TypeFor[json.Unmarshaler]()}
	textDecoder  = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// jsonTypes is a set of JSON Schema types. A number includes the integers.
type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeInteger
	typeNumber // numbers with a fraction; "number" in a schema is typeNumber|typeInteger
	typeString
	typeArray
	typeObject
	typeAny = typeNull | typeBoolean | typeInteger | typeNumber | typeString | typeArray | typeObject
)

var typeNames = []struct {
	t    jsonTypes
	name string
}{
	{typeObject, "object"}, {typeArray, "array"}, {typeString, "string"}, {typeNumber, "number"},
	{typeInteger, "integer"}, {typeBoolean, "boolean"}, {typeNull, "null"},
}

// holds reports whether a Go type taking t can decode every value of
// want. null decodes into any type (as its zero value), so it is ignored.
func (t jsonTypes) holds(want jsonTypes) bool {
	return want&^typeNull&^t == 0
}

func (t jsonTypes) names() []string {
	var names []string
	for _, tn := range typeNames {
		if t&tn.t != 0 && !(tn.t == typeInteger && t&typeNumber != 0) {
			names = append(names, tn.name)
		}
	}
	return names
}

func (t jsonTypes) String() string {
	if t == typeAny {
		return "any value"
	}
	return strings.Join(t.names(), " or ")
}

// schemaTypes is what s and its constraints let a value be.
func schemaTypes(s *jsonschema.Schema) jsonTypes {
	t := typeAny
	for _, c := range constraints(s) {
		if c.Bool != nil && !*c.Bool {
			return 0
		}
		if c.Types != nil && !c.Types.IsEmpty() {
			t &= namedTypes(c.Types.ToStrings())
		}
		if c.Enum != nil {
			t &= valueTypes(c.Enum.Values)
		}
		if c.Const != nil {
			t &= valueTypes([]any{*c.Const})
		}
	}
	return t
}

func namedTypes(names []string) jsonTypes {
	var t jsonTypes
	for _, n := range names {
		for _, tn := range typeNames {
			if tn.name == n {
				t |= tn.t
			}
		}
		if n == "number" {
			t |= typeInteger
		}
	}
	return t
}

func valueTypes(vs []any) jsonTypes {
	var t jsonTypes
	for _, v := range vs {
		switch v := v.(type) {
		case nil:
			t |= typeNull
		case bool:
			t |= typeBoolean
		case string:
			t |= typeString
		case []any:
			t |= typeArray
		case map[string]any:
			t |= typeObject
		case json.Number:
			if _, err := v.Int64(); err == nil {
				t |= typeInteger
			} else {
				t |= typeNumber
			}
		default:
			t |= typeNumber
		}
	}
	return t
}

// goTypes is what json v2 decodes into t.
func goTypes(t reflect.Type) jsonTypes {
	switch {
	case implements(t, jsonDecoders...):
		return typeAny
	case implements(t, textDecoder):
		return typeString
	}
	switch t.Kind() {
	case reflect.Pointer:
		return goTypes(t.Elem()) | typeNull
	case reflect.Interface:
		return typeAny
	case reflect.String:
		return typeString
	case reflect.Bool:
		return typeBoolean
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return typeInteger
	case reflect.Float32, reflect.Float64:
		return typeInteger | typeNumber
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return typeString // json v2 reads []byte from base64
		}
		return typeArray
	case reflect.Array:
		return typeArray
	case reflect.Map, reflect.Struct:
		return typeObject
	}
	return 0
}
