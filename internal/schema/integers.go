package schema

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// decodeOptions decode a payload the schema has accepted. JSON Schema
// counts 1.7e12 and 5.0 as integers, and so do Go integer fields here (json
// v2 alone takes only digits). Names are already known to be unique.
var decodeOptions = json.JoinOptions(
	jsontext.AllowDuplicateNames(true),
	json.WithUnmarshalers(json.JoinUnmarshalers(
		json.UnmarshalFromFunc(decodeInteger[int]),
		json.UnmarshalFromFunc(decodeInteger[int8]),
		json.UnmarshalFromFunc(decodeInteger[int16]),
		json.UnmarshalFromFunc(decodeInteger[int32]),
		json.UnmarshalFromFunc(decodeInteger[int64]),
		json.UnmarshalFromFunc(decodeInteger[uint]),
		json.UnmarshalFromFunc(decodeInteger[uint8]),
		json.UnmarshalFromFunc(decodeInteger[uint16]),
		json.UnmarshalFromFunc(decodeInteger[uint32]),
		json.UnmarshalFromFunc(decodeInteger[uint64]),
	)),
)

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// decodeInteger decodes a JSON number with no fraction into n, exactly,
// whatever its notation. Anything else is left to json v2.
func decodeInteger[N integer](dec *jsontext.Decoder, n *N) error {
	if dec.PeekKind() != '0' {
		return errors.ErrUnsupported // json v2 decodes it as usual
	}
	val, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if v, ok := digits[N](val); ok {
		*n = v
		return nil
	}
	v, ok := exact[N](string(val))
	if !ok {
		return newRangeError[N](string(val))
	}
	*n = v
	return nil
}

// digits is the fast path for a plain integer that surely fits N: at most
// 18 digits for a signed N of 64 bits.
func digits[N integer](val []byte) (N, bool) {
	neg := len(val) > 0 && val[0] == '-'
	body := val
	if neg {
		body = val[1:]
	}
	if len(body) == 0 || len(body) > 18 {
		return 0, false
	}
	var u uint64
	for _, c := range body {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	var v N
	if neg {
		if v = N(-int64(u)); int64(v) != -int64(u) || (v > 0) {
			return 0, false
		}
		return v, true
	}
	if v = N(u); uint64(v) != u || v < 0 {
		return 0, false
	}
	return v, true
}

// exact converts any JSON number to N if it is an integer N holds.
func exact[N integer](text string) (N, bool) {
	r, ok := new(big.Rat).SetString(text)
	if !ok || !r.IsInt() {
		return 0, false
	}
	i := r.Num()
	if signed[N]() {
		if !i.IsInt64() || int64(N(i.Int64())) != i.Int64() {
			return 0, false
		}
		return N(i.Int64()), true
	}
	if !i.IsUint64() || uint64(N(i.Uint64())) != i.Uint64() {
		return 0, false
	}
	return N(i.Uint64()), true
}

func signed[N integer]() bool {
	var zero N
	return zero-1 < zero
}

// rangeError is an integer field's range, worded for the payload: the
// number the schema accepted does not fit the field.
type rangeError struct {
	text     string
	min, max string
	fraction bool
}

func newRangeError[N integer](text string) *rangeError {
	bits := reflect.TypeFor[N]().Bits()
	e := &rangeError{text: text}
	if r, ok := new(big.Rat).SetString(text); ok && !r.IsInt() {
		e.fraction = true
	}
	if signed[N]() {
		e.min = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), uint(bits-1))).String()
		e.max = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits-1)), big.NewInt(1)).String()
	} else {
		e.min = "0"
		e.max = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits)), big.NewInt(1)).String()
	}
	return e
}

func (e *rangeError) Error() string {
	if e.fraction {
		return fmt.Sprintf("want an integer, got %s", abbreviate(e.text))
	}
	return fmt.Sprintf("want an integer from %s to %s, got %s", e.min, e.max, abbreviate(e.text))
}
