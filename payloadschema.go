package jetfn

import (
	"bytes"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// baseURL names a schema without an $id. It is never fetched (the loader
// loads nothing, and .invalid is a reserved name); a relative $ref then
// resolves against it and fails as a reference elsewhere should.
const baseURL = "https://jetfn.invalid/payload.schema.json"

// compileSchema compiles one self-contained schema and gathers what its
// problems are worded with.
func compileSchema(raw []byte) (*jsonschema.Schema, *schemaRules, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("parsing payload schema: %w", err)
	}
	url := baseURL
	if obj, ok := doc.(map[string]any); ok {
		if id, ok := obj["$id"].(string); ok && id != "" {
			url = id
		}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // loads nothing: a $ref elsewhere fails here
	if err := c.AddResource(url, doc); err != nil {
		return nil, nil, fmt.Errorf("loading payload schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, nil, fmt.Errorf("compiling payload schema: %w", err)
	}
	rules := &schemaRules{
		byLocation: map[string]*jsonschema.Schema{},
		charRules:  map[string]*regexp.Regexp{},
		conditions: map[string]string{},
	}
	rules.visit(s)
	return s, rules, nil
}

// schemaRules are facts about a compiled schema that make its problems
// readable, found once by visiting every subschema.
type schemaRules struct {
	// byLocation is each subschema by its location, which a validation
	// error names.
	byLocation map[string]*jsonschema.Schema
	// charRules holds, for each pattern of the form ^[...]+$ ("one or more
	// of these characters"), a regexp that matches one character the
	// pattern does not allow, so a problem can name it.
	charRules map[string]*regexp.Regexp
	// conditions words the `if` of each `then` subschema, by the then's
	// location: `event is "deleted"`.
	conditions map[string]string
}

func (r *schemaRules) visit(s *jsonschema.Schema) {
	if s == nil || r.byLocation[s.Location] != nil {
		return
	}
	r.byLocation[s.Location] = s
	if s.Pattern != nil {
		r.addCharRule(s.Pattern.String())
	}
	if s.If != nil && s.Then != nil {
		if cond := describeCondition(s.If); cond != "" {
			r.conditions[s.Then.Location] = cond
		}
	}
	for _, sub := range subschemas(s) {
		r.visit(sub)
	}
}

func (r *schemaRules) addCharRule(pattern string) {
	class, ok := strings.CutPrefix(pattern, "^[")
	if !ok {
		return
	}
	if class, ok = strings.CutSuffix(class, "]+$"); !ok || strings.Contains(class, "]") {
		return
	}
	other := "[^" + class + "]"
	if negated, ok := strings.CutPrefix(class, "^"); ok {
		other = "[" + negated + "]"
	}
	if bad, err := regexp.Compile(other); err == nil {
		r.charRules[pattern] = bad
	}
}

// subschemas lists every schema s holds directly.
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	subs := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
		s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	if s.DynamicRef != nil {
		subs = append(subs, s.DynamicRef.Ref)
	}
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	subs = append(subs, s.PrefixItems...)
	subs = slices.AppendSeq(subs, maps.Values(s.Properties))
	subs = slices.AppendSeq(subs, maps.Values(s.PatternProperties))
	subs = slices.AppendSeq(subs, maps.Values(s.DependentSchemas))
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			subs = append(subs, v)
		case []*jsonschema.Schema:
			subs = append(subs, v...)
		}
	}
	for _, dep := range s.Dependencies {
		if d, ok := dep.(*jsonschema.Schema); ok {
			subs = append(subs, d)
		}
	}
	return subs
}

// describeCondition words an `if` made only of properties with a const or
// an enum ("event is "deleted"", "failed is true"); it is empty for any
// other if.
func describeCondition(s *jsonschema.Schema) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		ps := s.Properties[name]
		switch {
		case ps.Const != nil:
			parts = append(parts, fmt.Sprintf("%s is %s", name, display(*ps.Const)))
		case ps.Enum != nil:
			parts = append(parts, fmt.Sprintf("%s is one of %s", name, displayAll(ps.Enum.Values)))
		default:
			return ""
		}
	}
	return strings.Join(parts, " and ")
}

// condition words the `if` whose `then` holds the subschema at location.
func (r *schemaRules) condition(location string) string {
	for then, cond := range r.conditions {
		if location == then || strings.HasPrefix(location, then+"/") {
			return cond
		}
	}
	return ""
}

// display is a JSON value as a problem quotes it: strings quoted and cut
// short, numbers as written, objects and arrays by kind.
func display(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(abbreviate(v))
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	default:
		return abbreviate(fmt.Sprint(v))
	}
}

func displayAll(vs []any) string {
	words := make([]string, len(vs))
	for i, v := range vs {
		words[i] = display(v)
	}
	return strings.Join(words, ", ")
}

// abbreviate cuts a long value to its start, so a problem stays one line.
func abbreviate(s string) string {
	const max = 40
	if r := []rune(s); len(r) > max {
		return string(r[:max-3]) + "..."
	}
	return s
}

// ratString is a schema's limit as JSON writes it.
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
