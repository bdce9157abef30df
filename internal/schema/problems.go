package schema

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
)

// pathStep is one step into a JSON value: a member name or an array index.
type pathStep struct {
	name    string
	index   int
	isIndex bool
}

// formatPath writes steps as a JSON path: names joined by dots, indices in
// brackets, and a name that would not read as one quoted in brackets.
func formatPath(steps []pathStep) string {
	if len(steps) == 1 && !steps[0].isIndex && plainName(steps[0].name) {
		return steps[0].name
	}
	var b strings.Builder
	for _, s := range steps {
		switch {
		case s.isIndex:
			fmt.Fprintf(&b, "[%d]", s.index)
		case plainName(s.name):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		default:
			fmt.Fprintf(&b, "[%s]", strconv.Quote(s.name))
		}
	}
	return b.String()
}

func plainName(name string) bool {
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '.', '[', ']', '"', '\'', ' ', '\t', '\r', '\n':
			return false
		}
	}
	return name != ""
}

// problemAt is one problem before it is worded into a problem list.
type problemAt struct {
	path, what string
}

func (p problemAt) String() string {
	if p.path == "" {
		return p.what
	}
	return p.path + ": " + p.what
}

// sortedProblems sorts problems by path, drops repeats, and words them.
func sortedProblems(probs []problemAt) []string {
	byPath := func(a, b problemAt) int { return cmp.Compare(a.path, b.path) }
	if !slices.IsSortedFunc(probs, byPath) {
		slices.SortStableFunc(probs, byPath)
	}
	probs = slices.Compact(probs)
	out := make([]string, len(probs))
	for i, p := range probs {
		out[i] = p.String()
	}
	return out
}

func problem(path, what string) []string {
	return []string{problemAt{path: path, what: what}.String()}
}

// decodeProblem words an error of decoding into T, which the schema
// already accepted: it means T holds less than the schema allows, such as a
// number out of an integer field's range.
func decodeProblem(err error) string {
	var se *json.SemanticError
	if !errors.As(err, &se) {
		return "cannot be decoded"
	}
	at := pointerPath(string(se.JSONPointer))
	var re *rangeError
	what := "cannot be decoded"
	switch {
	case errors.As(err, &re):
		what = re.Error()
	case se.GoType != nil && se.JSONKind != 0 && goTypes(se.GoType) != typeAny:
		what = fmt.Sprintf("want %s, got %s", articled(goTypes(se.GoType).names()), kindName(se.JSONKind.String()))
	}
	return problemAt{path: at, what: what}.String()
}

// pointerPath turns a JSON Pointer into a path. A pointer cannot tell an
// index from a name that is a number, so both read as a name.
func pointerPath(ptr string) string {
	if ptr == "" {
		return ""
	}
	var steps []pathStep
	for tok := range strings.SplitSeq(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		steps = append(steps, pathStep{name: tok})
	}
	return formatPath(steps)
}

// kindName is a JSON kind as jsontext names it ("number", "string", "[",
// "{", "null", "true", "false") in words.
func kindName(k string) string {
	switch k {
	case "{", "object":
		return "an object"
	case "[", "array":
		return "an array"
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "true", "false", "boolean":
		return "a boolean"
	case "null":
		return "null"
	}
	return k
}

// articled joins JSON type names with "or", each with its article.
func articled(types []string) string {
	if len(types) == 1 {
		return article(types[0])
	}
	words := make([]string, len(types))
	for i, t := range types {
		words[i] = article(t)
	}
	return strings.Join(words, " or ")
}

func article(t string) string {
	switch t {
	case "integer":
		return "an integer"
	case "object":
		return "an object"
	case "array":
		return "an array"
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "boolean":
		return "a boolean"
	case "null":
		return "null"
	}
	return "a " + t
}
