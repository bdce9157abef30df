package jetfn

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// session is the shape of transcription.session-ended, with its schema
// written out here so the root package tests without package events.
type session struct {
	ConversationID    string `json:"conversationId"`
	SessionID         string `json:"sessionId"`
	PublishedSegments int    `json:"publishedSegments"`
}

var sessionPayload = MustPayload[session]([]byte(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["conversationId", "sessionId", "publishedSegments"],
  "properties": {
    "conversationId": {"$ref": "#/$defs/id"},
    "sessionId": {"$ref": "#/$defs/id"},
    "publishedSegments": {"type": "integer", "minimum": 0}
  },
  "$defs": {"id": {"type": "string", "pattern": "^[^.*> \t]+$"}}
}`))

// order has nested objects and arrays, for paths deeper than one name.
type order struct {
	ID    string   `json:"id"`
	Price float64  `json:"price,omitzero"`
	Tags  []string `json:"tags,omitempty"`
	Ship  *address `json:"ship,omitzero"`
	Items []item   `json:"items"`
}

type address struct {
	City string `json:"city"`
}

type item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty,omitzero"`
}

var orderPayload = MustPayload[order]([]byte(`{
  "type": "object",
  "required": ["id", "items"],
  "properties": {
    "id": {"type": "string", "pattern": "^o-[0-9]+$", "description": "o- and a number"},
    "price": {"type": "number", "exclusiveMinimum": 0},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    "ship": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string", "minLength": 1}}},
    "items": {"type": "array", "minItems": 1, "items": {
      "type": "object", "required": ["sku"],
      "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}
    }}
  }
}`))

func TestDecodeReasons(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    string // "" means valid
	}{
		{name: "valid", payload: `{"conversationId":"c","sessionId":"s","publishedSegments":3}`},
		{name: "unknown members are allowed", payload: `{"conversationId":"c","sessionId":"s","publishedSegments":3,"x":{"y":[null]}}`},
		{name: "an integer written as 3.0 or 3e0", payload: `{"conversationId":"c","sessionId":"s","publishedSegments":3e0}`},
		{name: "not JSON", payload: `not json`, want: `payload: not JSON at byte 0: unexpected "not"`},
		{name: "empty", payload: ``, want: `payload: empty`},
		{name: "only whitespace", payload: " \r\n", want: `payload: empty`},
		{name: "a number as a string", payload: `{"conversationId":"c","sessionId":"s","publishedSegments":"3"}`,
			want: `payload: publishedSegments: want an integer, got a string`},
		{name: "missing and invalid, both listed", payload: `{"conversationId":"c.1","publishedSegments":3}`,
			want: `payload: conversationId: must not contain '.' (got "c.1"); sessionId: missing`},
		{name: "case variant", payload: `{"conversationId":"c","SESSIONID":"s","publishedSegments":3}`,
			want: `payload: sessionId: missing (the payload has "SESSIONID"; names are case-sensitive)`},
		{name: "duplicate name", payload: `{"conversationId":"c","sessionId":"s","sessionId":"t","publishedSegments":3}`,
			want: `payload: sessionId: appears more than once`},
		{name: "null", payload: `{"conversationId":"c","sessionId":null,"publishedSegments":3}`,
			want: `payload: sessionId: want a string, got null`},
		{name: "trailing data", payload: `{"conversationId":"c","sessionId":"s","publishedSegments":3}x`,
			want: `payload: trailing data at byte 60 after the JSON value`},
		{name: "two values", payload: `{"conversationId":"c","sessionId":"s","publishedSegments":3} {}`,
			want: `payload: trailing data at byte 61 after the JSON value`},
		{name: "cut short", payload: `{"conversationId":"c",`, want: `payload: not JSON at byte 22: ends before the value is complete`},
		{name: "a misspelled literal", payload: `{"conversationId":tru}`, want: `payload: not JSON at byte 18: unexpected "tru"`},
		{name: "a stray character", payload: `{"conversationId":"c",,}`, want: `payload: not JSON at byte 22: invalid character ',' at start of value`},
		{name: "invalid UTF-8", payload: "{\"conversationId\":\"\xff\"}", want: `payload: conversationId: invalid UTF-8 at byte 19`},
		{name: "an array", payload: `[]`, want: `payload: want an object, got an array`},
		{name: "a huge number", payload: `{"conversationId":"c","sessionId":"s","publishedSegments":1e999999}`,
			want: `payload: publishedSegments: 1e999999 is beyond the range of a JSON number`},
		{name: "more than the field holds", payload: `{"conversationId":"c","sessionId":"s","publishedSegments":1e19}`,
			want: `payload: publishedSegments: want an integer from -9223372036854775808 to 9223372036854775807, got 1e19`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sessionPayload.Decode([]byte(tt.payload))
			checkReason(t, err, tt.want)
		})
	}
}

func TestDecodeReasonsInNestedValues(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    string
	}{
		{name: "valid", payload: `{"id":"o-1","price":2.5,"tags":["a"],"ship":{"city":"Oslo"},"items":[{"sku":"x","qty":2}]}`},
		{name: "in an array element", payload: `{"id":"o-1","items":[{"sku":"x","qty":1},{"qty":0}]}`,
			want: `payload: items[1].qty: want at least 1, got 0; items[1].sku: missing`},
		{name: "in a nested object", payload: `{"id":"o-1","ship":{"city":""},"items":[{"sku":"x"}]}`,
			want: `payload: ship.city: must not be empty`},
		{name: "array rules", payload: `{"id":"o-1","tags":["a",7,"c"],"items":[]}`,
			want: `payload: items: want at least 1 items, got 0; tags: want at most 2 items, got 3; tags[1]: want a string, got 7`},
		{name: "a pattern worded by its description", payload: `{"id":"Order 1","items":[{"sku":"x"}]}`,
			want: `payload: id: "Order 1" breaks the rule: o- and a number`},
		{name: "an exclusive minimum", payload: `{"id":"o-1","price":0,"items":[{"sku":"x"}]}`,
			want: `payload: price: want more than 0, got 0`},
		{name: "a repeat in a nested object", payload: `{"id":"o-1","items":[{"sku":"x","sku":"y"}]}`,
			want: `payload: items[0].sku: appears more than once`},
		{name: "a name that is no identifier", payload: "{\"id\":\"o-1\",\"ship\":{\"city\":\"c\",\"a.b\":\"\xff\"}}",
			want: `payload: ship["a.b"]: invalid UTF-8 at byte 38`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := orderPayload.Decode([]byte(tt.payload))
			checkReason(t, err, tt.want)
		})
	}
}

func checkReason(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("err = %v, want valid", err)
		}
		return
	}
	var pe *PayloadError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want a *PayloadError", err, err)
	}
	if got := err.Error(); got != want {
		t.Errorf("reason\n got %s\nwant %s", got, want)
	}
}

func TestDecodeFillsTheValue(t *testing.T) {
	got, err := orderPayload.Decode([]byte(`{"id":"o-1","price":2.5,"tags":["a"],"ship":{"city":"Oslo"},"items":[{"sku":"x","qty":2e0}],"note":"kept out"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "o-1" || got.Price != 2.5 || len(got.Tags) != 1 || got.Ship == nil || got.Ship.City != "Oslo" ||
		len(got.Items) != 1 || got.Items[0] != (item{SKU: "x", Qty: 2}) {
		t.Errorf("decoded %+v", got)
	}
}

// checked refuses what its schema cannot: sku and qty compared.
type checked struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

func (c *checked) Validate() error {
	if c.Min > c.Max {
		return errors.New("min is above max")
	}
	return nil
}

var checkedPayload = MustPayload[checked]([]byte(`{"type":"object","properties":{"min":{"type":"integer"},"max":{"type":"integer"}}}`))

func TestValidatorRunsAfterTheSchema(t *testing.T) {
	if _, err := checkedPayload.Decode([]byte(`{"min":1,"max":2}`)); err != nil {
		t.Fatal(err)
	}
	_, err := checkedPayload.Decode([]byte(`{"min":3,"max":2}`))
	checkReason(t, err, "payload: min is above max")
	_, err = checkedPayload.Decode([]byte(`{"min":"3","max":2}`))
	checkReason(t, err, "payload: min: want an integer, got a string") // the schema first
	_, err = checkedPayload.Encode(checked{Min: 3, Max: 2})
	checkReason(t, err, "payload: min is above max")
}

func TestEncode(t *testing.T) {
	data, err := sessionPayload.Encode(session{ConversationID: "c", SessionID: "s", PublishedSegments: 2})
	if err != nil || string(data) != `{"conversationId":"c","sessionId":"s","publishedSegments":2}` {
		t.Fatalf("Encode = %s, %v", data, err)
	}
	_, err = sessionPayload.Encode(session{SessionID: "s", PublishedSegments: -1})
	checkReason(t, err, "payload: conversationId: must not be empty; publishedSegments: want at least 0, got -1")
}

func TestHandler(t *testing.T) {
	var got []session
	h := sessionPayload.Handler(func(_ context.Context, _ Msg, s session) error {
		got = append(got, s)
		return nil
	})
	if err := h.Handle(context.Background(), Msg{Data: []byte(`{"conversationId":"c","sessionId":"s","publishedSegments":1}`)}); err != nil {
		t.Fatal(err)
	}
	err := h.Handle(context.Background(), Msg{Data: []byte(`{}`)})
	var pe *PayloadError
	if !errors.Is(err, ErrMalformed) || !errors.As(err, &pe) || len(pe.Problems) != 3 {
		t.Fatalf("err = %v, want a malformed PayloadError with three problems", err)
	}
	if want := "malformed message: payload: conversationId: missing; publishedSegments: missing; sessionId: missing"; err.Error() != want {
		t.Errorf("reason %q, want %q", err, want)
	}
	if len(got) != 1 || got[0].SessionID != "s" {
		t.Errorf("handled %+v, want the one valid payload", got)
	}
}

// TestNewPayloadChecksAgreement: a Go type and a schema that disagree are
// refused with every mismatch named.
func TestNewPayloadChecksAgreement(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type wrong struct {
		Name   string  `json:"name"`
		Count  string  `json:"count"`
		Ratio  int     `json:"ratio"`
		Extra  bool    `json:"extra"`
		Inner  inner   `json:"inner"`
		Any    string  `json:"any"`
		Maybe  *string `json:"maybe"`
		hidden int
	}
	_, err := NewPayload[wrong]([]byte(`{
	  "type": "object",
	  "required": ["name", "ghost"],
	  "properties": {
	    "name": {"type": "string"},
	    "count": {"type": "integer"},
	    "ratio": {"type": "number"},
	    "missing": {"type": "string"},
	    "inner": {"type": "object", "properties": {"n": {"type": "string"}}},
	    "any": {"description": "no type at all"},
	    "maybe": {"type": ["string", "null"]}
	  }
	}`))
	if err == nil {
		t.Fatal("NewPayload accepted a type that disagrees with its schema")
	}
	for _, want := range []string{
		`payload type jetfn.wrong disagrees with its schema: `,
		`Any ("any"): the schema allows any value, which string cannot hold`,
		`Count ("count"): the schema allows integer, which string cannot hold`,
		`Inner ("inner").N ("n"): the schema allows string, which int cannot hold`,
		`Ratio ("ratio"): the schema allows number, which int cannot hold`,
		`the schema's property "missing" is no field of jetfn.wrong`,
		`field Extra ("extra") is no property of the schema`,
		`the schema requires "ghost", which is no field of jetfn.wrong`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}
	for _, notWanted := range []string{"Name", "Maybe", "hidden"} {
		if strings.Contains(err.Error(), notWanted) {
			t.Errorf("error %q names %s, which agrees", err, notWanted)
		}
	}
}

func TestNewPayloadRefusesBadSchemas(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{name: "not JSON", schema: `{`, want: "parsing payload schema"},
		{name: "not a schema", schema: `{"type": 7}`, want: "compiling payload schema"},
		{name: "a reference elsewhere", schema: `{"$ref": "other.schema.json"}`, want: "compiling payload schema"},
		{name: "a root that is no object", schema: `{"type": "array"}`, want: "the schema allows array, which jetfn.session cannot hold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPayload[session]([]byte(tt.schema))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// FuzzDecodeJSON feeds arbitrary bytes to Payload.Decode: it must never
// panic; what it refuses it refuses with problems in JSON's words (no Go
// types, no parser or schema internals); what it accepts holds its
// required fields and encodes back to a payload the schema accepts.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []string{
		`{"id":"o-1","items":[{"sku":"x","qty":1}]}`, `{"id":"o-1","items":[{"qty":0}],"ship":{}}`,
		`{"id":"o","id":"p"}`, `{"a":{"b":[1,{"c":null}]}}`, `[]`, `null`, `not json`, ``, `{"id":"o","items":[]} x`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := orderPayload.Decode(data)
		if err != nil {
			var pe *PayloadError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("refused %q with %v (%T), want a PayloadError", data, err, err)
			}
			for _, leak := range []string{"jsontext", "jsonschema", "json:", "Go ", "urn:", "#/", "main."} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("refused %q with %q, which names %q", data, err, leak)
				}
			}
			return
		}
		if o.ID == "" || len(o.Items) == 0 {
			t.Fatalf("accepted %q without its required fields: %+v", data, o)
		}
		if _, err := orderPayload.Encode(o); err != nil {
			t.Fatalf("accepted %q as %+v, which encodes to a refused payload: %v", data, o, err)
		}
	})
}

// node refers to itself and to a $ref with a sibling rule, two references
// that must stay references.
type node struct {
	Name  string `json:"name"`
	Child *node  `json:"child,omitzero"`
}

var nodePayload = MustPayload[node]([]byte(`{
  "type": "object",
  "required": ["name"],
  "properties": {
    "name": {"$ref": "#/$defs/text", "minLength": 2},
    "child": {"$ref": "#"}
  },
  "$defs": {"text": {"type": "string", "description": "some text"}}
}`))

func TestReferencesKeepTheirMeaning(t *testing.T) {
	tests := []struct {
		name, payload, want string
	}{
		{name: "valid", payload: `{"name":"ab","child":{"name":"cd"}}`},
		{name: "a sibling of $ref applies", payload: `{"name":"a"}`, want: "payload: name: want at least 2 characters, got 1"},
		{name: "the target applies", payload: `{"name":5}`, want: "payload: name: want a string, got 5"},
		{name: "a reference to the root recurses", payload: `{"name":"ab","child":{"child":{"name":false}}}`,
			want: "payload: child.child.name: want a string, got false; child.name: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nodePayload.Decode([]byte(tt.payload))
			checkReason(t, err, tt.want)
		})
	}
}
