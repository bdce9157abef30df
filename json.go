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

// Validator is implemented by event and config types with rules beyond
// their shape. The JSON adapter calls Validate after decoding, and an error
// makes the message malformed; Config.DecodeValid calls it after decoding a
// config block.
type Validator interface {
	Validate() error
}

// JSON adapts a typed handler to Handler. The payload is decoded into T; it
// is malformed (dead-lettered, never retried) when it is not one JSON value,
// has trailing data, repeats a key, has a key that matches a field only when
// case is ignored, lacks a field tagged `required:"true"` (or has it null),
// or when T's Validate method refuses it.
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
