package schema

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// problems words every problem of a failed validation of tree. The
// validator's own messages name keywords, schema URLs and Go types; these
// name the member and say what is wrong with it in JSON's words.
func (r *schemaRules) problems(tree any, err error) []string {
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return problem("", "cannot be checked: "+err.Error())
	}
	probs := make([]problemAt, 0, 4)
	r.collect(tree, verr, &probs)
	if len(probs) == 0 {
		probs = append(probs, problemAt{what: "breaks the schema"})
	}
	return sortedProblems(probs)
}

// collect adds the problems of e and its causes. Errors that only group
// others (a schema, a $ref, an allOf) add their causes'.
func (r *schemaRules) collect(tree any, e *jsonschema.ValidationError, probs *[]problemAt) {
	var buf [8]pathStep
	steps, v := locate(buf[:0], tree, e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		for _, c := range e.Causes {
			r.collect(tree, c, probs)
		}
	case *kind.Required:
		for _, name := range k.Missing {
			*probs = append(*probs, problemAt{path: formatPath(append(steps, pathStep{name: name})),
				what: r.missing(e.SchemaURL, v, name)})
		}
	case *kind.DependentRequired:
		r.dependents(steps, k.Prop, k.Missing, probs)
	case *kind.Dependency:
		r.dependents(steps, k.Prop, k.Missing, probs)
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			*probs = append(*probs, problemAt{path: formatPath(append(steps, pathStep{name: name})), what: "not allowed"})
		}
	default:
		what := r.describe(e, v)
		if cond := r.condition(e.SchemaURL); cond != "" {
			what += " (when " + cond + ")"
		}
		*probs = append(*probs, problemAt{path: formatPath(steps), what: what})
	}
}

// missing words a required member that is absent; v is the object that
// lacks it. A member whose name differs only in case is the likely
// mistake, so it is named.
func (r *schemaRules) missing(schemaURL string, v any, name string) string {
	var notes []string
	if cond := r.condition(schemaURL); cond != "" {
		notes = append(notes, "required when "+cond)
	}
	if k := caseVariant(v, name); k != "" {
		notes = append(notes, fmt.Sprintf("the payload has %q; names are case-sensitive", k))
	}
	if len(notes) == 0 {
		return "missing"
	}
	return "missing (" + strings.Join(notes, "; ") + ")"
}

// caseVariant is the first name (in sorted order) of object v that
// differs from name only in case, or "".
func caseVariant(v any, name string) string {
	obj, _ := v.(map[string]any)
	var found string
	for k := range obj {
		if k != name && strings.EqualFold(k, name) && (found == "" || k < found) {
			found = k
		}
	}
	return found
}

func (r *schemaRules) dependents(steps []pathStep, prop string, missing []string, probs *[]problemAt) {
	for _, name := range missing {
		*probs = append(*probs, problemAt{path: formatPath(append(steps, pathStep{name: name})),
			what: fmt.Sprintf("missing (required when %s is present)", prop)})
	}
}

// describe words one broken rule about the value v.
func (r *schemaRules) describe(e *jsonschema.ValidationError, v any) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return "want " + articled(k.Want) + ", got " + got(v)
	case *kind.Enum:
		if len(k.Want) == 1 {
			return fmt.Sprintf("want %s, got %s", display(k.Want[0]), display(v))
		}
		return fmt.Sprintf("want one of %s, got %s", displayAll(k.Want), display(v))
	case *kind.Const:
		return fmt.Sprintf("want %s, got %s", display(k.Want), display(v))
	case *kind.Minimum:
		return "want at least " + ratString(k.Want) + ", got " + display(v)
	case *kind.Maximum:
		return fmt.Sprintf("want at most %s, got %s", ratString(k.Want), display(v))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("want more than %s, got %s", ratString(k.Want), display(v))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("want less than %s, got %s", ratString(k.Want), display(v))
	case *kind.MultipleOf:
		return fmt.Sprintf("want a multiple of %s, got %s", ratString(k.Want), display(v))
	case *kind.MinLength:
		if k.Want == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("want at least %d characters, got %d", k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("want at most %d characters, got %d", k.Want, k.Got)
	case *kind.Pattern:
		return r.pattern(e.SchemaURL, k)
	case *kind.Format:
		return fmt.Sprintf("want a %s, got %s", k.Want, display(v))
	case *kind.MinItems:
		return fmt.Sprintf("want at least %d items, got %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("want at most %d items, got %d", k.Want, k.Got)
	case *kind.UniqueItems:
		return fmt.Sprintf("items %d and %d are equal; each must be different", k.Duplicates[0], k.Duplicates[1])
	case *kind.MinProperties:
		return fmt.Sprintf("want at least %d members, got %d", k.Want, k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("want at most %d members, got %d", k.Want, k.Got)
	case *kind.AnyOf:
		return "matches none of the forms the schema allows"
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			return "matches none of the forms the schema allows"
		}
		return "matches more than one of the forms the schema allows, where exactly one must match"
	case *kind.Not:
		return "matches a form the schema forbids"
	case *kind.FalseSchema:
		return "not allowed"
	default:
		return fmt.Sprintf("breaks the schema's %q rule", strings.Join(e.ErrorKind.KeywordPath(), "/"))
	}
}

// pattern words a string that fails a pattern: the character it may not
// hold when the pattern lists the allowed ones, else the pattern's
// description, and only else the pattern itself.
func (r *schemaRules) pattern(schemaURL string, k *kind.Pattern) string {
	if rule := r.charRules[k.Want]; rule != nil {
		if k.Got == "" {
			return "must not be empty"
		}
		if c, ok := rule.first(k.Got); ok {
			return "must not contain " + strconv.QuoteRune(c) + " (got " + display(k.Got) + ")"
		}
	}
	if s := r.byLocation[schemaURL]; s != nil && s.Description != "" {
		return fmt.Sprintf("%s breaks the rule: %s", display(k.Got), s.Description)
	}
	return fmt.Sprintf("%s does not match the pattern %s", display(k.Got), k.Want)
}

// got names the JSON type of v, or, for a number or a boolean, v itself.
func got(v any) string {
	switch v := v.(type) {
	case json.Number:
		return abbreviate(string(v))
	case bool:
		return strconv.FormatBool(v)
	case string:
		return "a string"
	}
	return display(v)
}

// locate follows an instance location into tree: the path it reads as,
// appended to steps, and the value there.
func locate(steps []pathStep, tree any, location []string) ([]pathStep, any) {
	v := tree
	for _, tok := range location {
		switch node := v.(type) {
		case []any:
			i, _ := strconv.Atoi(tok)
			steps = append(steps, pathStep{index: i, isIndex: true})
			if i >= 0 && i < len(node) {
				v = node[i]
			}
		case map[string]any:
			steps = append(steps, pathStep{name: tok})
			v = node[tok]
		default:
			steps = append(steps, pathStep{name: tok})
		}
	}
	return steps, v
}
