package events_test

import (
	"io/fs"
	"slices"
	"testing"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
)

// TestEveryTypeAgreesWithItsSchema runs NewPayload's check of Go type
// against schema for every events type (MustPayload ran it at init too,
// and would have panicked), and makes sure no schema file lacks its type.
func TestEveryTypeAgreesWithItsSchema(t *testing.T) {
	checks := map[string]func([]byte) error{
		"segment.schema.json":              agrees[events.Segment],
		"session-ended.schema.json":        agrees[events.SessionEnded],
		"transcript-processed.schema.json": agrees[events.TranscriptProcessed],
		"recording-event.schema.json":      agrees[events.RecordingEvent],
		"recording-notice.schema.json":     agrees[events.RecordingNotice],
		"summaries-report.schema.json":     agrees[events.SummariesReport],
	}
	files, err := fs.Glob(events.Schemas, "schemas/*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(checks) {
		t.Errorf("schemas %v, but %d have a Go type here", files, len(checks))
	}
	for _, file := range files {
		name := file[len("schemas/"):]
		t.Run(name, func(t *testing.T) {
			check, ok := checks[name]
			if !ok {
				t.Fatal("no Go type for this schema")
			}
			raw, err := fs.ReadFile(events.Schemas, file)
			if err != nil {
				t.Fatal(err)
			}
			if err := check(raw); err != nil {
				t.Error(err)
			}
		})
	}
}

func agrees[T any](schema []byte) error {
	_, err := jetfn.NewPayload[T](schema)
	return err
}

// TestReadableReasons pins the exact reason a dead letter carries for the
// faults publishers make, in the payload's own terms.
func TestReadableReasons(t *testing.T) {
	const ended = `"conversationId":"c1","sessionId":"s1","publishedSegments":3`
	tests := []struct {
		name    string
		decode  func([]byte) error
		payload string
		want    string
	}{
		{name: "not JSON", decode: decodeEnded, payload: `not json`,
			want: `payload: not JSON at byte 0: unexpected "not"`},
		{name: "empty", decode: decodeEnded, payload: ``,
			want: `payload: empty`},
		{name: "whitespace", decode: decodeEnded, payload: " \n\t",
			want: `payload: empty`},
		{name: "count as a string", decode: decodeEnded, payload: `{"conversationId":"c1","sessionId":"s1","publishedSegments":"3"}`,
			want: `payload: publishedSegments: want an integer, got a string`},
		{name: "missing and invalid together", decode: decodeEnded, payload: `{"conversationId":"c.1","publishedSegments":3}`,
			want: `payload: conversationId: must not contain '.' (got "c.1"); sessionId: missing`},
		{name: "every problem, sorted by path", decode: decodeEnded, payload: `{"sessionId":"","publishedSegments":-1}`,
			want: `payload: conversationId: missing; publishedSegments: want at least 0, got -1; sessionId: must not be empty`},
		{name: "case variant", decode: decodeEnded, payload: `{"conversationId":"c1","SessionID":"s1","publishedSegments":3}`,
			want: `payload: sessionId: missing (the payload has "SessionID"; names are case-sensitive)`},
		{name: "duplicate name", decode: decodeEnded, payload: `{` + ended + `,"sessionId":"s2"}`,
			want: `payload: sessionId: appears more than once`},
		{name: "null", decode: decodeEnded, payload: `{"conversationId":null,"sessionId":"s1","publishedSegments":3}`,
			want: `payload: conversationId: want a string, got null`},
		{name: "null payload", decode: decodeEnded, payload: `null`,
			want: `payload: want an object, got null`},
		{name: "trailing data", decode: decodeEnded, payload: `{` + ended + `} {}`,
			want: `payload: trailing data at byte 63 after the JSON value`},
		{name: "cut short", decode: decodeEnded, payload: `{"conversationId":`,
			want: `payload: not JSON at byte 18: ends before the value is complete`},
		{name: "fraction", decode: decodeEnded, payload: `{"conversationId":"c1","sessionId":"s1","publishedSegments":1.5}`,
			want: `payload: publishedSegments: want an integer, got 1.5`},
		{name: "whitespace in an ID", decode: decodeEnded, payload: `{"conversationId":"c1","sessionId":"s\t1","publishedSegments":3}`,
			want: `payload: sessionId: must not contain '\t' (got "s\t1")`},
		{name: "invalid UTF-8", decode: decodeEnded, payload: "{\"conversationId\":\"c\xff\",\"sessionId\":\"s1\",\"publishedSegments\":3}",
			want: `payload: conversationId: invalid UTF-8 at byte 20`},
		{name: "unknown event", decode: decodeRecording, payload: `{"ts":1,"event":"failed","recordingId":"r","conversationId":"c"}`,
			want: `payload: event: want one of "requested", "recording-confirmed", "started", "stop-requested", "stopped", "uploaded", "stored", "downloaded", "deleted", got "failed"`},
		{name: "deleted without reason", decode: decodeRecording, payload: `{"ts":1,"event":"deleted","recordingId":"r","conversationId":"c"}`,
			want: `payload: reason: missing (required when event is "deleted")`},
		{name: "deleted with empty reason", decode: decodeRecording, payload: `{"ts":1,"event":"deleted","recordingId":"r","conversationId":"c","reason":""}`,
			want: `payload: reason: must not be empty (when event is "deleted")`},
		{name: "ts zero and a subject token", decode: decodeRecording, payload: `{"ts":0,"event":"started","recordingId":"a>","conversationId":"c"}`,
			want: `payload: recordingId: must not contain '>' (got "a>"); ts: want at least 1, got 0`},
		{name: "failed notice without reason", decode: decodeNotice, payload: `{"recordingId":"r","event":"deleted","ts":1,"state":"deleted","failed":true}`,
			want: `payload: reason: missing (required when failed is true)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode([]byte(tt.payload))
			if err == nil || err.Error() != tt.want {
				t.Errorf("reason\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func decodeEnded(b []byte) error {
	_, err := events.SessionEndedPayload.Decode(b)
	return err
}

func decodeRecording(b []byte) error {
	_, err := events.RecordingEventPayload.Decode(b)
	return err
}

func decodeNotice(b []byte) error {
	_, err := events.RecordingNoticePayload.Decode(b)
	return err
}

// TestPublishersRefuseWhatFunctionsRefuse: Encode checks by the same
// contract as Decode, with the same words.
func TestPublishersRefuseWhatFunctionsRefuse(t *testing.T) {
	_, err := events.SessionEndedPayload.Encode(events.SessionEnded{ConversationID: "c 1", SessionID: "s1", PublishedSegments: -1})
	want := `payload: conversationId: must not contain ' ' (got "c 1"); publishedSegments: want at least 0, got -1`
	if err == nil || err.Error() != want {
		t.Errorf("Encode error\n got %v\nwant %s", err, want)
	}
	data, err := events.RecordingEventPayload.Encode(events.RecordingEvent{TS: 7, Event: events.RecordingStarted, RecordingID: "r", ConversationID: "c"})
	if err != nil || !slices.Equal(data, []byte(`{"ts":7,"event":"started","recordingId":"r","conversationId":"c"}`)) {
		t.Errorf("Encode = %s, %v", data, err)
	}
}
