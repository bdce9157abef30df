package schema

import (
	"bytes"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
	if err := c.AddResource(url, inlineRefs(doc)); err != nil {
		return nil, nil, fmt.Errorf("loading payload schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, nil, fmt.Errorf("compiling payload schema: %w", err)
	}
	rules := &schemaRules{
		byLocation: map[string]*jsonschema.Schema{},
		charRules:  map[string]*charRule{},
		conditions: map[string]string{},
		names:      map[string]string{},
	}
	rules.visit(s)
	return s, rules, nil
}

// inlineRefs copies the target of each local $ref in place of the
// reference, where that means the same: the validator then skips a scope
// and a sub-validation per reference, a quarter of its time on a small
// payload. A $ref with siblings other than annotations, into a schema with
// its own $id or anchor, or inside a cycle stays as it is, and so does
// every $ref of a document with a nested $id, whose references need not
// resolve against the root.
func inlineRefs(doc any) any {
	root, ok := doc.(map[string]any)
	if !ok || hasNestedID(root, true) {
		return doc
	}
	return inline(root, root, nil)
}

func inline(root map[string]any, v any, stack []string) any {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok && onlyAnnotations(v) && !slices.Contains(stack, ref) && len(stack) < 8 {
			if target, ok := pointerTarget(root, ref); ok {
				merged := maps.Clone(target)
				for k, sibling := range v {
					if k != "$ref" {
						merged[k] = sibling
					}
				}
				return inline(root, merged, append(stack, ref))
			}
		}
		out := make(map[string]any, len(v))
		for k, sub := range v {
			if dataKeywords[k] {
				out[k] = sub // JSON data, where "$ref" is a name like any other
			} else {
				out[k] = inline(root, sub, stack)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, sub := range v {
			out[i] = inline(root, sub, stack)
		}
		return out
	}
	return v
}

var (
	dataKeywords = map[string]bool{"const": true, "enum": true, "default": true, "examples": true}
	annotations  = map[string]bool{"$ref": true, "$comment": true, "title": true, "description": true,
		"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true}
	scopeKeywords = []string{"$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$schema"}
)

func onlyAnnotations(v map[string]any) bool {
	for k := range v {
		if !annotations[k] {
			return false
		}
	}
	return true
}

// pointerTarget is the schema object a "#/..." reference points to in
// root, if it is one that can stand in the reference's place.
func pointerTarget(root map[string]any, ref string) (map[string]any, bool) {
	ptr, ok := strings.CutPrefix(ref, "#/")
	if !ok || strings.Contains(ptr, "%") {
		return nil, false
	}
	var v any = root
	for tok := range strings.SplitSeq(ptr, "/") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		v = obj[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
	}
	target, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	for _, k := range scopeKeywords {
		if _, ok := target[k]; ok {
			return nil, false
		}
	}
	return target, true
}

func hasNestedID(v any, top bool) bool {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["$id"]; ok && !top {
			return true
		}
		for k, sub := range v {
			if !dataKeywords[k] && hasNestedID(sub, false) {
				return true
			}
		}
	case []any:
		for _, sub := range v {
			if hasNestedID(sub, false) {
				return true
			}
		}
	}
	return false
}

// schemaRules are facts about a compiled schema that make its problems
// readable, found once by visiting every subschema.
type schemaRules struct {
	// byLocation is each subschema by its location, which a validation
	// error names.
	byLocation map[string]*jsonschema.Schema
	// charRules holds, for each pattern of the form ^[...]+$ ("one or more
	// of these characters"), the characters it does not allow, so a
	// problem can name the one a value holds.
	charRules map[string]*charRule
	// conditions words the `if` of each `then` subschema, by the then's
	// location: `event is "deleted"`.
	conditions map[string]string
	// names is every property name, for readTree to reuse.
	names map[string]string
}

// charRule is the characters a pattern of allowed ones refuses.
type charRule struct {
	ascii [utf8.RuneSelf]bool // refused, for the common case
	other *regexp.Regexp      // matches a refused character
}

// first is the first character of s that r refuses, if any.
func (r *charRule) first(s string) (rune, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf {
			if at := r.other.FindStringIndex(s[i:]); at != nil {
				c, _ := utf8.DecodeRuneInString(s[i+at[0]:])
				return c, true
			}
			return 0, false
		} else if r.ascii[c] {
			return rune(c), true
		}
	}
	return 0, false
}

func (r *schemaRules) visit(s *jsonschema.Schema) {
	if s == nil || r.byLocation[s.Location] != nil {
		return
	}
	r.byLocation[s.Location] = s
	for name := range s.Properties {
		r.names[name] = name
	}
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
	bad, err := regexp.Compile(other)
	if err != nil {
		return
	}
	rule := &charRule{other: bad}
	for c := range utf8.RuneSelf {
		rule.ascii[c] = bad.MatchString(string(rune(c)))
	}
	r.charRules[pattern] = rule
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
