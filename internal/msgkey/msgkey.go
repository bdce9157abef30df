// Package msgkey reads a message's key: a subject token, a header, or a
// top-level field of its JSON payload, as a function's manifest declares
// (design/per-key-ordering.md). A message without its key is malformed:
// the error says why in words a person reads in a dead letter.
package msgkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNoKey wraps every reason a message has no key.
var ErrNoKey = errors.New("no key")

// Source is where a function's key comes from: exactly one of its fields
// is set.
type Source struct {
	// Token is the 1-based position of the key among the subject's
	// dot-separated tokens.
	Token int
	// Header names the header holding the key (its first value).
	Header string
	// Field names a top-level field of the JSON payload, a string or a
	// number (its JSON text, so 42 and 42.0 are different keys).
	Field string
}

// Of reads the key of a message with subject, header and data.
func (s Source) Of(subject string, header map[string][]string, data []byte) (string, error) {
	switch {
	case s.Token > 0:
		return fromToken(subject, s.Token)
	case s.Header != "":
		return fromHeader(header, s.Header)
	case s.Field != "":
		return fromField(data, s.Field)
	}
	return "", fmt.Errorf("%w: the function declares no key source", ErrNoKey)
}

func fromToken(subject string, n int) (string, error) {
	tokens := strings.Split(subject, ".")
	if n > len(tokens) {
		return "", fmt.Errorf("%w: subject %s has %d tokens, the key is token %d", ErrNoKey, subject, len(tokens), n)
	}
	return tokens[n-1], nil
}

// fromHeader reads name as http.Header does (canonical form first), and
// as it was written, since NATS keeps a header's case.
func fromHeader(h map[string][]string, name string) (string, error) {
	v := h[name]
	if len(v) == 0 {
		for k, vs := range h {
			if strings.EqualFold(k, name) {
				v = vs
				break
			}
		}
	}
	if len(v) == 0 || v[0] == "" {
		return "", fmt.Errorf("%w: header %s is absent or empty", ErrNoKey, name)
	}
	return v[0], nil
}

// fromField scans the payload's top level for field, decoding only that
// field's value: the handler decodes the payload as it always does.
func fromField(data []byte, field string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", fmt.Errorf("%w: the payload is not a JSON object, so it has no field %s", ErrNoKey, field)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("%w: the payload is not valid JSON: %v", ErrNoKey, err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", fmt.Errorf("%w: the payload is not valid JSON: %v", ErrNoKey, err)
		}
		if t != field {
			continue
		}
		switch v := v.(type) {
		case string:
			if v == "" {
				return "", fmt.Errorf("%w: field %s is an empty string", ErrNoKey, field)
			}
			return v, nil
		case json.Number:
			return v.String(), nil
		default:
			return "", fmt.Errorf("%w: field %s is %s, want a string or a number", ErrNoKey, field, kind(v))
		}
	}
	return "", fmt.Errorf("%w: field %s is absent from the payload", ErrNoKey, field)
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}
