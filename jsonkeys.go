package jetfn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// checkKeys closes two gaps encoding/json leaves open: a key repeated in one
// object (encoding/json silently keeps the last, so two readers of the same
// bytes can disagree) and a top-level key that matches a field of t only when
// case is ignored (encoding/json accepts "SessionID" for "sessionId", a JSON
// Schema does not).
func checkKeys(data []byte, t reflect.Type) error {
	fields := jsonFieldNames(t)
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*jsonFrame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("decoding JSON: %w", err)
		}
		stack, err = step(stack, tok, fields)
		if err != nil {
			return err
		}
	}
}

// jsonFrame is one open object or array while walking the tokens.
type jsonFrame struct {
	object    bool
	expectKey bool
	keys      map[string]bool
}

func step(stack []*jsonFrame, tok json.Token, fields []string) ([]*jsonFrame, error) {
	var top *jsonFrame
	if len(stack) > 0 {
		top = stack[len(stack)-1]
	}
	if d, ok := tok.(json.Delim); ok {
		switch d {
		case '{', '[':
			return append(stack, &jsonFrame{object: d == '{', expectKey: d == '{', keys: map[string]bool{}}), nil
		default:
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].expectKey = true
			}
			return stack, nil
		}
	}
	if top == nil || !top.object {
		return stack, nil
	}
	if !top.expectKey {
		top.expectKey = true // a scalar value; the next token is a key
		return stack, nil
	}
	key := tok.(string)
	if top.keys[key] {
		return nil, fmt.Errorf("duplicate key %q", key)
	}
	top.keys[key] = true
	top.expectKey = false
	if len(stack) == 1 {
		for _, f := range fields {
			if key != f && strings.EqualFold(key, f) {
				return nil, fmt.Errorf("key %q differs from field %q only in case", key, f)
			}
		}
	}
	return stack, nil
}

// jsonFieldNames lists the JSON keys of a struct type's fields.
func jsonFieldNames(t reflect.Type) []string {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "":
			names = append(names, f.Name)
		default:
			names = append(names, name)
		}
	}
	return names
}
