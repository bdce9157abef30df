package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// readTree reads data as exactly one JSON value into the tree a schema
// validates: map[string]any, []any, string, json.Number, bool and nil.
// jsontext refuses a repeated name and invalid UTF-8 by default; readTree
// words those, the other syntax errors and trailing data as the payload's
// one problem. json.Number keeps a number's exact text, so a schema's
// integer and range checks see what the publisher wrote. A name found in
// names is that string rather than a new one: most names a payload holds
// are its schema's.
func readTree(data []byte, names map[string]string) (any, []string) {
	if len(bytes.Trim(data, jsonSpace)) == 0 {
		return nil, problem("", "empty")
	}
	r := treeReaders.Get().(*treeReader)
	defer r.release()
	r.buf = *bytes.NewBuffer(data) // the decoder reads a bytes.Buffer in place
	r.dec.Reset(&r.buf)
	r.names = names
	tree, err := r.value()
	if err != nil {
		return nil, textProblem(data, err)
	}
	// The decoder reads a stream of values; a payload is one.
	end := int(r.dec.InputOffset())
	if rest := bytes.TrimLeft(data[end:], jsonSpace); len(rest) > 0 {
		return nil, problem("", fmt.Sprintf("trailing data at byte %d after the JSON value", len(data)-len(rest)))
	}
	return tree, nil
}

// jsonSpace is the whitespace JSON allows between tokens; other Unicode
// spaces are not JSON.
const jsonSpace = " \t\r\n"

// maxNumberLen bounds a number's text: the schema's checks do exact
// arithmetic on it, which for a long enough number takes seconds.
const maxNumberLen = 100

// treeReader is a decoder kept for reuse: making one costs more than
// reading a small payload.
type treeReader struct {
	buf   bytes.Buffer
	dec   jsontext.Decoder
	names map[string]string
}

var treeReaders = sync.Pool{New: func() any { return new(treeReader) }}

// release returns r to the pool without the payload it read.
func (r *treeReader) release() {
	r.buf = bytes.Buffer{}
	r.dec.Reset(&r.buf)
	r.names = nil
	treeReaders.Put(r)
}

// treeError is a syntax error with the path to where it happened, gathered
// while the recursion unwinds.
type treeError struct {
	err  error
	path []pathStep // innermost first
}

func (e *treeError) Error() string { return e.err.Error() }

func within(err error, step pathStep) error {
	te, ok := err.(*treeError)
	if !ok {
		te = &treeError{err: err}
	}
	te.path = append(te.path, step)
	return te
}

func (r *treeReader) value() (any, error) {
	tok, err := r.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		return r.object()
	case '[':
		return r.array()
	case '"':
		return tok.String(), nil
	case '0':
		return number(tok.String())
	case 't', 'f':
		return tok.Bool(), nil
	default:
		return nil, nil
	}
}

func (r *treeReader) object() (any, error) {
	obj := make(map[string]any, 8) // one allocation for a small object
	for r.dec.PeekKind() != '}' {
		raw, err := r.dec.ReadValue() // also reports a syntax error PeekKind met
		if err != nil {
			return nil, err
		}
		name := r.name(raw)
		v, err := r.value()
		if err != nil {
			return nil, within(err, pathStep{name: name})
		}
		obj[name] = v
	}
	_, err := r.dec.ReadToken()
	return obj, err
}

// name is the member name raw quotes, from names when it is there.
func (r *treeReader) name(raw jsontext.Value) string {
	if unquoted := raw[1 : len(raw)-1]; bytes.IndexByte(unquoted, '\\') < 0 {
		if name, ok := r.names[string(unquoted)]; ok {
			return name
		}
		return string(unquoted)
	}
	name, _ := jsontext.AppendUnquote(nil, raw) // raw is a valid JSON string
	return string(name)
}

func (r *treeReader) array() (any, error) {
	arr := []any{}
	for r.dec.PeekKind() != ']' {
		v, err := r.value()
		if err != nil {
			return nil, within(err, pathStep{index: len(arr), isIndex: true})
		}
		arr = append(arr, v)
	}
	_, err := r.dec.ReadToken()
	return arr, err
}

// number keeps a number's text, refusing one too long or too far from zero
// to be anything but an attack: no JSON implementation holds 1e999999 as a
// number (RFC 8259, section 6, advises staying within IEEE 754 doubles).
func number(text string) (any, error) {
	if len(text) <= 15 && !strings.ContainsAny(text, "eE") {
		return json.Number(text), nil // always in range, cheap to check
	}
	if len(text) > maxNumberLen {
		return nil, errNumber{text: text, reason: fmt.Sprintf("is longer than %d characters", maxNumberLen)}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || (f == 0 && strings.ContainsAny(mantissa(text), "123456789")) {
		return nil, errNumber{text: text, reason: "is beyond the range of a JSON number"}
	}
	return json.Number(text), nil
}

func mantissa(text string) string {
	if i := strings.IndexAny(text, "eE"); i >= 0 {
		return text[:i]
	}
	return text
}

// errNumber is a number readTree refuses.
type errNumber struct{ text, reason string }

func (e errNumber) Error() string { return "number " + e.reason }

// textProblem words an error of readTree: where the text stops being JSON,
// or which name repeats.
func textProblem(data []byte, err error) []string {
	var path []pathStep
	if te, ok := err.(*treeError); ok {
		path, err = te.path, te.err
	}
	if ne, ok := err.(errNumber); ok {
		return problem(formatPath(reversed(path)), fmt.Sprintf("%s %s", abbreviate(ne.text), ne.reason))
	}
	se, ok := err.(*jsontext.SyntacticError)
	if !ok {
		return problem("", "not JSON: ends before the value is complete")
	}
	offset := se.ByteOffset
	switch {
	case se.Err == jsontext.ErrDuplicateName:
		return problem(formatPath(append(reversed(path), pathStep{name: se.JSONPointer.LastToken()})), "appears more than once")
	case se.Err == io.ErrUnexpectedEOF:
		return problem("", fmt.Sprintf("not JSON at byte %d: ends before the value is complete", offset))
	}
	if msg := se.Err.Error(); msg == "invalid UTF-8" { // its error value is internal to jsontext
		return problem(formatPath(reversed(path)), fmt.Sprintf("invalid UTF-8 at byte %d", offset))
	} else if start, word := wordAt(data, int(offset)); word == "" {
		return problem("", fmt.Sprintf("not JSON at byte %d: %s", offset, msg))
	} else {
		return problem("", fmt.Sprintf("not JSON at byte %d: unexpected %q", start, word))
	}
}

// wordAt is the run of letters at or just before offset, where a payload
// of plain text, an unquoted string or a misspelled literal fails: "not
// json" fails at its "o", as if it were a misspelled null, and "tru}" at
// its "}".
func wordAt(data []byte, offset int) (int, string) {
	if offset > len(data) {
		return offset, ""
	}
	start, end := offset, offset
	for start > 0 && isLetter(data[start-1]) {
		start--
	}
	for end < len(data) && isLetter(data[end]) {
		end++
	}
	return start, string(data[start:end])
}

func isLetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }

func reversed(path []pathStep) []pathStep {
	out := make([]pathStep, len(path))
	for i, s := range path {
		out[len(path)-1-i] = s
	}
	return out
}
