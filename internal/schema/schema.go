// Package schema is the engine behind jetfn.Payload: it compiles a JSON
// Schema, checks that it agrees with a Go type, reads a payload's text
// strictly, and words every way a payload breaks the schema in the
// payload's own terms ("segments[2].text: missing"). The contract package
// reaches it through Compile, Check, Unmarshal, Marshal and ValidatorProblems alone, so a
// function author opening the module root meets the contract, not this.
package schema

import (
	"reflect"

	"github.com/go-json-experiment/json"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jetfn/jetfn/internal/problems"
)

// Schema is one compiled payload schema with the rules its wording needs.
// It is safe for concurrent use.
type Schema struct {
	schema *jsonschema.Schema
	rules  *schemaRules
}

// Compile compiles raw (JSON Schema draft 2020-12 unless its $schema says
// otherwise) and checks that it agrees with t: every property the schema
// names is a field of t with that JSON name and a JSON type t can take,
// every JSON field of t is a property, and every required property is a
// field. The error names each mismatch.
func Compile(raw []byte, t reflect.Type) (*Schema, error) {
	compiled, rules, err := compileSchema(raw)
	if err != nil {
		return nil, err
	}
	if err := checkAgreement(t, compiled); err != nil {
		return nil, err
	}
	return &Schema{schema: compiled, rules: rules}, nil
}

// Check reads data strictly (one JSON value, unique names, valid UTF-8)
// and validates it; nil if it keeps the contract, else every problem,
// sorted by path.
func (s *Schema) Check(data []byte) []string {
	tree, probs := readTree(data, s.rules.names)
	if probs != nil {
		return probs
	}
	err := s.schema.Validate(tree)
	if err == nil {
		return nil
	}
	return s.rules.problems(tree, err)
}

// Unmarshal decodes data, which Check accepted, into v (a pointer); nil,
// or the one problem of a value v's type cannot hold (an integer beyond
// its field's range, which the schema should bound).
func Unmarshal(data []byte, v any) []string {
	if err := json.Unmarshal(data, v, decodeOptions); err != nil {
		return []string{decodeProblem(err)}
	}
	return nil
}

// Marshal encodes v deterministically, as Payload.Encode publishes it.
func Marshal(v any) ([]byte, error) {
	return json.Marshal(v, json.Deterministic(true))
}

// ValidatorProblems lists what a Validate method reported, one problem per
// errors.Join part, sorted.
func ValidatorProblems(err error) []string {
	var probs []problemAt
	for _, e := range problems.Split(err) {
		probs = append(probs, problemAt{what: e.Error()})
	}
	return sortedProblems(probs)
}
