package jetfn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

// This file is the decoder before Payload, kept only for the deprecated
// JSON and DecodeJSON.

// JSON adapts a typed handler to Handler. The payload is decoded into T; it
// is malformed (dead-lettered, never retried) when it is not one JSON value,
// has trailing data, repeats a key, has a key that matches a field only when
// case is ignored, lacks a field tagged `required:"true"` (or has it null),
// or when T's Validate method refuses it.
//
// Deprecated: use Payload.Handler, whose schema states every rule and whose
// PayloadError lists every problem. JSON is kept, unchanged, only until the
// runtime's own tests move to Payload; it then goes with this file.
func JSON[T any](handle func(ctx context.Context, msg Msg, event T) error) Handler {
	return HandlerFunc(func(ctx context.Context, msg Msg) error {
		event, err := DecodeJSON[T](msg.Data)
		if err != nil {
			return Malformed(err)
		}
		return handle(ctx, msg, event)
	})
}

// DecodeJSON decodes and validates one event, as JSON does.
//
// Deprecated: use Payload.Decode; see JSON.
func DecodeJSON[T any](data []byte) (T, error) {
	var event T
	if err := decodeStrict(data, &event); err != nil {
		return event, err
	}
	if err := checkKeys(data, reflect.TypeFor[T]()); err != nil {
		return event, err
	}
	if err := checkRequired(data, reflect.TypeFor[T]()); err != nil {
		return event, err
	}
	if v, ok := any(&event).(Validator); ok {
		if err := v.Validate(); err != nil {
			return event, err
		}
	}
	return event, nil
}

// decodeStrict decodes exactly one JSON value; trailing data is an error
// that encoding/json would otherwise ignore.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("decoding JSON: trailing data after the value")
	}
	return nil
}

// requiredKeys caches, per struct type, the JSON keys tagged required.
var requiredKeys sync.Map

// checkRequired reports a required key that is absent or null. The key must match
// exactly: encoding/json would accept "SESSIONID" for "sessionId", which a
// contract written in JSON Schema does not.
func checkRequired(data []byte, t reflect.Type) error {
	keys := requiredOf(t)
	if len(keys) == 0 {
		return nil
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(data, &present); err != nil {
		return fmt.Errorf("decoding JSON: %w", err)
	}
	var missing []string
	for _, k := range keys {
		// null counts as absent: encoding/json would turn it into a zero
		// value that looks like a real one.
		if v, ok := present[k]; !ok || string(bytes.TrimSpace(v)) == "null" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing required field %s", strings.Join(missing, ", "))
	}
	return nil
}

func requiredOf(t reflect.Type) []string {
	if cached, ok := requiredKeys.Load(t); ok {
		return cached.([]string)
	}
	var keys []string
	if t.Kind() == reflect.Struct {
		for f := range t.Fields() {
			if f.Tag.Get("required") != "true" {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			keys = append(keys, name)
		}
	}
	requiredKeys.Store(t, keys)
	return keys
}

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
