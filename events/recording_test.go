package events

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jetfn/jetfn"
)

func compile(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	s, err := CompileSchema(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func schemaErr(s *jsonschema.Schema, payload []byte) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(payload)))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// goErr is what a Go consumer does with a payload: decode it with its
// Payload.
func goErr[T any](p *jetfn.Payload[T], payload []byte) error {
	_, err := p.Decode(payload)
	return err
}

func TestRecordingEventGoEncodingMatchesSchema(t *testing.T) {
	s := compile(t, "recording-event.schema.json")
	for _, name := range RecordingEventNames() {
		ev := RecordingEvent{TS: 1_700_000_000_000, Event: name, RecordingID: "rec-1", ConversationID: "conv-1",
			Extra: map[string]json.RawMessage{"durationMs": json.RawMessage(`4200`), "by": json.RawMessage(`{"user":"u1"}`)}}
		if name == RecordingDeleted {
			ev.Reason = "never-started"
		}
		t.Run(string(name), func(t *testing.T) {
			data, err := RecordingEventPayload.Encode(ev)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if err := schemaErr(s, data); err != nil {
				t.Fatalf("schema refused Go encoding %s: %v", data, err)
			}
			v1, err := json.Marshal(ev)
			if err != nil || string(v1) != string(data) {
				t.Fatalf("encoding/json wrote %s (%v), want %s", v1, err, data)
			}
			back, err := RecordingEventPayload.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, ev) {
				t.Fatalf("round trip\n got %+v\nwant %+v", back, ev)
			}
			var backV1 RecordingEvent
			if err := json.Unmarshal(data, &backV1); err != nil || !reflect.DeepEqual(backV1, ev) {
				t.Fatalf("encoding/json round trip\n got %+v (%v)\nwant %+v", backV1, err, ev)
			}
		})
	}
}

func TestRecordingEventContract(t *testing.T) {
	s := compile(t, "recording-event.schema.json")
	tests := []struct {
		name    string
		payload string
		wantOK  bool
	}{
		{name: "minimal", payload: `{"ts":1,"event":"started","recordingId":"r","conversationId":"c"}`, wantOK: true},
		{name: "unknown fields kept", payload: `{"ts":1,"event":"stored","recordingId":"r","conversationId":"c","url":"s3://x","$odd":null}`, wantOK: true},
		{name: "reason on another event", payload: `{"ts":1,"event":"stopped","recordingId":"r","conversationId":"c","reason":"user"}`, wantOK: true},
		{name: "ts with exponent", payload: `{"ts":1.7e12,"event":"started","recordingId":"r","conversationId":"c"}`, wantOK: true},
		{name: "deleted with reason", payload: `{"ts":1,"event":"deleted","recordingId":"r","conversationId":"c","reason":"never-started"}`, wantOK: true},
		{name: "not JSON", payload: `{"ts":`},
		{name: "not an object", payload: `[1]`},
		{name: "null", payload: `null`},
		{name: "unknown event", payload: `{"ts":1,"event":"failed","recordingId":"r","conversationId":"c"}`},
		{name: "missing recordingId", payload: `{"ts":1,"event":"started","conversationId":"c"}`},
		{name: "missing conversationId", payload: `{"ts":1,"event":"started","recordingId":"r"}`},
		{name: "missing ts", payload: `{"event":"started","recordingId":"r","conversationId":"c"}`},
		{name: "missing event", payload: `{"ts":1,"recordingId":"r","conversationId":"c"}`},
		{name: "empty recordingId", payload: `{"ts":1,"event":"started","recordingId":"","conversationId":"c"}`},
		{name: "recordingId with dot", payload: `{"ts":1,"event":"started","recordingId":"a.b","conversationId":"c"}`},
		{name: "recordingId with >", payload: `{"ts":1,"event":"started","recordingId":"a>","conversationId":"c"}`},
		{name: "conversationId with *", payload: `{"ts":1,"event":"started","recordingId":"r","conversationId":"*"}`},
		{name: "conversationId with space", payload: `{"ts":1,"event":"started","recordingId":"r","conversationId":"a b"}`},
		{name: "ts zero", payload: `{"ts":0,"event":"started","recordingId":"r","conversationId":"c"}`},
		{name: "ts negative", payload: `{"ts":-5,"event":"started","recordingId":"r","conversationId":"c"}`},
		{name: "ts fraction", payload: `{"ts":1.5,"event":"started","recordingId":"r","conversationId":"c"}`},
		{name: "ts string", payload: `{"ts":"1","event":"started","recordingId":"r","conversationId":"c"}`},
		{name: "ts too large", payload: `{"ts":1e19,"event":"started","recordingId":"r","conversationId":"c"}`},
		{name: "recordingId number", payload: `{"ts":1,"event":"started","recordingId":7,"conversationId":"c"}`},
		{name: "reason null", payload: `{"ts":1,"event":"stopped","recordingId":"r","conversationId":"c","reason":null}`},
		{name: "deleted without reason", payload: `{"ts":1,"event":"deleted","recordingId":"r","conversationId":"c"}`},
		{name: "deleted with empty reason", payload: `{"ts":1,"event":"deleted","recordingId":"r","conversationId":"c","reason":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serr, gerr := schemaErr(s, []byte(tt.payload)), goErr(RecordingEventPayload, []byte(tt.payload))
			if got := serr == nil; got != tt.wantOK {
				t.Errorf("schema accepted = %v, want %v (%v)", got, tt.wantOK, serr)
			}
			if got := gerr == nil; got != tt.wantOK {
				t.Errorf("Go accepted = %v, want %v (%v)", got, tt.wantOK, gerr)
			}
		})
	}
}

func TestRecordingNoticeContract(t *testing.T) {
	s := compile(t, "recording-notice.schema.json")
	good := []RecordingNotice{
		{RecordingID: "r", Event: RecordingStarted, TS: 5, State: RecordingStarted},
		{RecordingID: "r", Event: RecordingStopped, TS: 5, State: RecordingDeleted, Failed: true, Reason: "never-started"},
	}
	for _, n := range good {
		data, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := schemaErr(s, data); err != nil {
			t.Errorf("schema refused Go encoding %s: %v", data, err)
		}
		if err := goErr(RecordingNoticePayload, data); err != nil {
			t.Errorf("Go refused its own encoding %s: %v", data, err)
		}
	}
	bad := []struct {
		name    string
		payload string
	}{
		{name: "missing failed", payload: `{"recordingId":"r","event":"started","ts":1,"state":"started"}`},
		{name: "missing state", payload: `{"recordingId":"r","event":"started","ts":1,"failed":false}`},
		{name: "unknown state", payload: `{"recordingId":"r","event":"started","ts":1,"state":"failed","failed":false}`},
		{name: "failed without reason", payload: `{"recordingId":"r","event":"deleted","ts":1,"state":"deleted","failed":true}`},
		{name: "failed not boolean", payload: `{"recordingId":"r","event":"started","ts":1,"state":"started","failed":"no"}`},
		{name: "recordingId with dot", payload: `{"recordingId":"a.b","event":"started","ts":1,"state":"started","failed":false}`},
		{name: "ts zero", payload: `{"recordingId":"r","event":"started","ts":0,"state":"started","failed":false}`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if err := schemaErr(s, []byte(tt.payload)); err == nil {
				t.Error("schema accepted it")
			}
			if err := goErr(RecordingNoticePayload, []byte(tt.payload)); err == nil {
				t.Error("Go accepted it")
			}
		})
	}
}

func TestRecordingNaming(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "subject", got: RecordingSubject(RecordingStopRequested), want: "recording.stop-requested"},
		{name: "notice subject", got: RecordingNoticeSubject("conv-1"), want: "conversation.conv-1.recording"},
		{name: "msg id", got: RecordingMsgID("rec-1", RecordingDeleted, 42), want: "rec-1:deleted:42"},
		{name: "event msg id", got: RecordingEvent{RecordingID: "r", Event: RecordingStored, TS: 7}.MsgID(), want: "r:stored:7"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if n := len(RecordingEventNames()); n != 9 {
		t.Errorf("%d event names, want 9", n)
	}
	if RecordingRequested.Rank() != 0 || RecordingDeleted.Rank() != 8 || RecordingEventName("failed").Known() {
		t.Error("lifecycle ranks are wrong")
	}
}

// TestRecordingIDPatternIsTheSharedOne keeps the recording schemas on the ID
// rule that TestIDRuleAgreesOnEveryRune checks against validateID.
func TestRecordingIDPatternIsTheSharedOne(t *testing.T) {
	want := idPattern(t, "session-ended.schema.json")
	for _, name := range []string{"recording-event.schema.json", "recording-notice.schema.json"} {
		if got := idPattern(t, name); got != want {
			t.Errorf("%s id pattern %q, want %q", name, got, want)
		}
	}
}

func idPattern(t *testing.T, name string) string {
	t.Helper()
	raw, err := fs.ReadFile(Schemas, "schemas/"+name)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs struct {
			ID struct {
				Pattern string `json:"pattern"`
			} `json:"id"`
		} `json:"$defs"`
		Properties struct {
			RecordingID struct {
				Pattern string `json:"pattern"`
			} `json:"recordingId"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Defs.ID.Pattern != "" {
		return doc.Defs.ID.Pattern
	}
	return doc.Properties.RecordingID.Pattern
}
