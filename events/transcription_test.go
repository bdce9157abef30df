package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
)

// contracts decode and encode each schema's payloads as functions and Go
// publishers do: with the schema's Payload.
var contracts = map[string]contract{
	"segment.schema.json":              contractOf(events.SegmentPayload),
	"session-ended.schema.json":        contractOf(events.SessionEndedPayload),
	"transcript-processed.schema.json": contractOf(events.TranscriptProcessedPayload),
}

type contract struct {
	decode func([]byte) (any, error)
	encode func(any) ([]byte, error)
}

func contractOf[T any](p *jetfn.Payload[T]) contract {
	return contract{
		decode: func(b []byte) (any, error) { return p.Decode(b) },
		encode: func(v any) ([]byte, error) { return p.Encode(v.(T)) },
	}
}

func goErr(schema string, payload []byte) error {
	_, err := contracts[schema].decode(payload)
	return err
}

func compile(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	s, err := events.CompileSchema(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func schemaErr(t *testing.T, s *jsonschema.Schema, payload []byte) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(payload)))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}

// TestGoPayloadsMatchSchemas checks that what Go encodes, with the Payload
// as the publishers do and with encoding/json as tests and tools do, is
// what the schemas accept, and decodes back to the same value.
func TestGoPayloadsMatchSchemas(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		value  any
	}{
		{name: "segment", schema: "segment.schema.json", value: events.Segment{
			ConversationID: "c1", SessionID: "s1", Index: 3, Speaker: "Ana", Text: "Hello?", StartMs: 100, EndMs: 900}},
		{name: "segment with empty text", schema: "segment.schema.json", value: events.Segment{
			ConversationID: "c1", SessionID: "s1", Speaker: "Ana"}},
		{name: "session ended", schema: "session-ended.schema.json", value: events.SessionEnded{
			ConversationID: "c1", SessionID: "s1", PublishedSegments: 12}},
		{name: "silent session ended", schema: "session-ended.schema.json", value: events.SessionEnded{
			ConversationID: "c-1_x:y", SessionID: "s1"}},
		{name: "transcript processed", schema: "transcript-processed.schema.json", value: events.TranscriptProcessed{
			ConversationID: "c1", SessionID: "s1", Segments: 12, Complete: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encoded, err := contracts[tt.schema].encode(tt.value)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			v1, err := json.Marshal(tt.value)
			if err != nil {
				t.Fatal(err)
			}
			for _, payload := range [][]byte{encoded, v1} {
				if err := schemaErr(t, compile(t, tt.schema), payload); err != nil {
					t.Errorf("schema refuses %s: %v", payload, err)
				}
				back, err := contracts[tt.schema].decode(payload)
				if err != nil {
					t.Errorf("Go refuses %s: %v", payload, err)
				} else if back != tt.value {
					t.Errorf("%s decodes to %+v, want %+v", payload, back, tt.value)
				}
			}
		})
	}
}

// TestSchemaAndGoAgree runs payloads through both the schema and the Go
// decoder; they must give the same verdict, and it must be want.
func TestSchemaAndGoAgree(t *testing.T) {
	const seg = "segment.schema.json"
	const ended = "session-ended.schema.json"
	const processed = "transcript-processed.schema.json"
	tests := []struct {
		name    string
		schema  string
		payload string
		want    bool // valid
	}{
		{name: "ended ok", schema: ended, payload: `{"conversationId":"c","sessionId":"s","publishedSegments":0}`, want: true},
		{name: "ended extra field", schema: ended, payload: `{"conversationId":"c","sessionId":"s","publishedSegments":1,"x":null}`, want: true},
		{name: "ended missing sessionId", schema: ended, payload: `{"conversationId":"c","publishedSegments":1}`},
		{name: "ended missing publishedSegments", schema: ended, payload: `{"conversationId":"c","sessionId":"s"}`},
		{name: "ended case-variant key", schema: ended, payload: `{"conversationId":"c","SessionId":"s","publishedSegments":1}`},
		{name: "ended empty conversationId", schema: ended, payload: `{"conversationId":"","sessionId":"s","publishedSegments":1}`},
		{name: "ended dot in sessionId", schema: ended, payload: `{"conversationId":"c","sessionId":"a.b","publishedSegments":1}`},
		{name: "ended star", schema: ended, payload: `{"conversationId":"*","sessionId":"s","publishedSegments":1}`},
		{name: "ended gt", schema: ended, payload: `{"conversationId":"c","sessionId":"a>","publishedSegments":1}`},
		{name: "ended space", schema: ended, payload: `{"conversationId":"c d","sessionId":"s","publishedSegments":1}`},
		{name: "ended tab", schema: ended, payload: `{"conversationId":"c","sessionId":"s\t","publishedSegments":1}`},
		{name: "ended negative count", schema: ended, payload: `{"conversationId":"c","sessionId":"s","publishedSegments":-1}`},
		{name: "ended fractional count", schema: ended, payload: `{"conversationId":"c","sessionId":"s","publishedSegments":1.5}`},
		{name: "ended count as string", schema: ended, payload: `{"conversationId":"c","sessionId":"s","publishedSegments":"3"}`},
		{name: "ended null count", schema: ended, payload: `{"conversationId":"c","sessionId":"s","publishedSegments":null}`},
		{name: "ended null id", schema: ended, payload: `{"conversationId":null,"sessionId":"s","publishedSegments":1}`},
		{name: "ended id as number", schema: ended, payload: `{"conversationId":7,"sessionId":"s","publishedSegments":1}`},
		{name: "ended array", schema: ended, payload: `[]`},
		{name: "segment ok", schema: seg, payload: `{"conversationId":"c","sessionId":"s","index":0,"speaker":"A","text":"hi","startMs":0,"endMs":10}`, want: true},
		{name: "segment missing text", schema: seg, payload: `{"conversationId":"c","sessionId":"s","index":0,"speaker":"A","startMs":0,"endMs":10}`},
		{name: "segment null text", schema: seg, payload: `{"conversationId":"c","sessionId":"s","index":0,"speaker":"A","text":null,"startMs":0,"endMs":10}`},
		{name: "segment empty speaker", schema: seg, payload: `{"conversationId":"c","sessionId":"s","index":0,"speaker":"","text":"hi","startMs":0,"endMs":10}`},
		{name: "segment negative index", schema: seg, payload: `{"conversationId":"c","sessionId":"s","index":-1,"speaker":"A","text":"hi","startMs":0,"endMs":10}`},
		{name: "segment negative start", schema: seg, payload: `{"conversationId":"c","sessionId":"s","index":0,"speaker":"A","text":"hi","startMs":-5,"endMs":10}`},
		{name: "segment bad session", schema: seg, payload: `{"conversationId":"c","sessionId":"s.1","index":0,"speaker":"A","text":"hi","startMs":0,"endMs":10}`},
		{name: "processed ok", schema: processed, payload: `{"conversationId":"c","sessionId":"s","segments":0,"complete":false}`, want: true},
		{name: "processed missing complete", schema: processed, payload: `{"conversationId":"c","sessionId":"s","segments":0}`},
		{name: "processed complete as string", schema: processed, payload: `{"conversationId":"c","sessionId":"s","segments":0,"complete":"yes"}`},
		{name: "processed null complete", schema: processed, payload: `{"conversationId":"c","sessionId":"s","segments":0,"complete":null}`},
		{name: "processed negative segments", schema: processed, payload: `{"conversationId":"c","sessionId":"s","segments":-2,"complete":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serr := schemaErr(t, compile(t, tt.schema), []byte(tt.payload))
			gerr := goErr(tt.schema, []byte(tt.payload))
			if got := serr == nil; got != tt.want {
				t.Errorf("schema valid = %v, want %v (%v)", got, tt.want, serr)
			}
			if got := gerr == nil; got != tt.want {
				t.Errorf("Go valid = %v, want %v (%v)", got, tt.want, gerr)
			}
		})
	}
}

// TestIDRuleAgreesOnEveryRune checks the ID rule rune by rune. The schema
// lists whitespace character by character, so every regex dialect reads it
// alike; the rule it means is no '.', '*', '>' or unicode.IsSpace, and
// both the schema alone (as another language validates) and the Payload
// must refuse exactly those.
func TestIDRuleAgreesOnEveryRune(t *testing.T) {
	s := compile(t, "session-ended.schema.json")
	check := func(r rune) {
		id := "a" + string(r) + "b"
		payload, err := json.Marshal(events.SessionEnded{ConversationID: id, SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		want := r == '.' || r == '*' || r == '>' || unicode.IsSpace(r)
		serr := schemaErr(t, s, payload)
		gerr := goErr("session-ended.schema.json", payload)
		if (serr != nil) != want || (gerr != nil) != want {
			t.Errorf("rune %U: schema says %v, Payload says %v; want refused = %v", r, serr, gerr, want)
		}
	}
	for r := rune(0); r <= 0x3100; r++ {
		check(r)
	}
	for _, rng := range unicode.White_Space.R16 {
		for r := rune(rng.Lo); r <= rune(rng.Hi); r += rune(rng.Stride) {
			check(r)
		}
	}
}

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "segment", got: events.SegmentKey("s1", 7), want: "s1:7"},
		{name: "segment method", got: events.Segment{SessionID: "s1", Index: 0}.Key(), want: "s1:0"},
		{name: "session ended", got: events.SessionEndedKey("c1", "s1"), want: "c1:s1:ended"},
		{name: "summary", got: events.SummaryKey("c1", "s1"), want: "c1:s1"},
		{name: "plain speaker", got: events.SpeakerKey("Ana"), want: "Ana"},
		{name: "speaker with dots", got: events.SpeakerKey("Dr. J. Okafor"), want: "Dr\uff0e J\uff0e Okafor"},
		{name: "speaker starting with $", got: events.SpeakerKey("$x$"), want: "\uff04x$"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s key = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
