package jetfn

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/jetfn/jetfn/internal/schema"
)

// Validator is implemented by payload and config types with a rule that a
// JSON Schema cannot state, such as one field compared with another.
// Payload.Decode and Payload.Encode call Validate after the schema has
// accepted the payload, and each problem it reports becomes one of the
// PayloadError's; Config.DecodeValid calls it after decoding a config block.
type Validator interface {
	Validate() error
}

// Payload is the contract of one kind of message payload: a JSON Schema,
// where every rule lives (types, required, not null, patterns, minimums,
// enums), and the Go type T a handler works with, which only names and
// types the fields. The schema is also what publishers in other languages
// validate against, so Go and every other side read one contract.
//
// A Payload is built once, usually as a package-level MustPayload, and is
// safe for concurrent use.
type Payload[T any] struct {
	schema *schema.Schema
}

// NewPayload compiles the schema raw (JSON Schema draft 2020-12 unless its $schema
// says otherwise) and checks that it agrees with T: every property the
// schema names is a field of T with that JSON name and a JSON type T can
// take, every JSON field of T is a property, and every required property
// is a field. The error names each mismatch. The schema must be
// self-contained: references to other files are refused.
func NewPayload[T any](raw []byte) (*Payload[T], error) {
	compiled, err := schema.Compile(raw, reflect.TypeFor[T]())
	if err != nil {
		return nil, err
	}
	return &Payload[T]{schema: compiled}, nil
}

// MustPayload is NewPayload for package-level variables: it panics on an
// error, which is a programming mistake found the first time the package
// is loaded (by its tests, say).
func MustPayload[T any](schema []byte) *Payload[T] {
	p, err := NewPayload[T](schema)
	if err != nil {
		panic(err)
	}
	return p
}

// Decode reads one payload. It refuses, as a *PayloadError, a payload that
// is empty, is not JSON, is followed by more data, repeats a name in an
// object, holds invalid UTF-8, or breaks a rule of the schema (every broken
// rule is listed); one with a number T cannot hold (an integer beyond its
// field's range, which the schema should bound); and one whose Validate
// (see Validator) reports a problem. Names are case-sensitive, and members
// the schema does not name are allowed and ignored.
func (p *Payload[T]) Decode(data []byte) (T, error) {
	var zero T
	if probs := p.schema.Check(data); probs != nil {
		return zero, &PayloadError{Problems: probs}
	}
	var v T // on the heap, as Unmarshal takes its address: only here
	if probs := schema.Unmarshal(data, &v); probs != nil {
		return zero, &PayloadError{Problems: probs}
	}
	if err := validate(&v); err != nil {
		return zero, err
	}
	return v, nil
}

// Encode marshals v and checks the result as Decode would, so a publisher
// refuses to send what every consumer would refuse. The JSON it returns is
// what was checked, to be published as it is.
func (p *Payload[T]) Encode(v T) ([]byte, error) {
	data, err := schema.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding payload: %w", err)
	}
	if probs := p.schema.Check(data); probs != nil {
		return nil, &PayloadError{Problems: probs}
	}
	if err := validate(&v); err != nil {
		return nil, err
	}
	return data, nil
}

// Handler adapts a typed handler to Handler: each message's Data is
// decoded with Decode, and a payload Decode refuses is malformed, so the
// runtime dead-letters it with the PayloadError as the reason and never
// retries it. Otherwise handle's return value decides the ack, as
// Handler's doc says.
func (p *Payload[T]) Handler(handle func(ctx context.Context, msg Msg, v T) error) Handler {
	return HandlerFunc(func(ctx context.Context, msg Msg) error {
		v, err := p.Decode(msg.Data)
		if err != nil {
			return Malformed(err)
		}
		return handle(ctx, msg, v)
	})
}

// validate runs v's Validate, if it has one, and lists its problems.
func validate(v any) error {
	val, ok := v.(Validator)
	if !ok {
		return nil
	}
	if err := val.Validate(); err != nil {
		return &PayloadError{Problems: schema.ValidatorProblems(err)}
	}
	return nil
}

// PayloadError is every way a payload breaks its contract, each problem
// worded in the payload's own terms: "<path>: <what is wrong>", where the
// path is the member's JSON path (conversationId, segments[2].text) and is
// left out for the payload as a whole. Problems are sorted by path. The
// same fault reads the same in every function.
type PayloadError struct {
	Problems []string
}

// Error lists the problems on one line, as a dead letter's reason:
// "payload: sessionId: missing; publishedSegments: want an integer, got a
// string".
func (e *PayloadError) Error() string {
	return "payload: " + strings.Join(e.Problems, "; ")
}
