package jetfn

import (
	"strings"
	"testing"
)

type sessionEvent struct {
	ConversationID string `json:"conversationId" required:"true"`
	SessionID      string `json:"sessionId" required:"true"`
	Segments       int    `json:"segments"`
	Extra          struct {
		Note string `json:"note"`
	} `json:"extra"`
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    string // "" means valid
	}{
		{name: "valid", payload: `{"conversationId":"c","sessionId":"s","segments":3}`},
		{name: "valid with nested and arrays", payload: `{"conversationId":"c","sessionId":"s","extra":{"note":"x"},"tags":[{"a":1},{"a":2}]}`},
		{name: "not JSON", payload: `{"conversationId":`, want: "decoding JSON"},
		{name: "trailing data", payload: `{"conversationId":"c","sessionId":"s"}x`, want: "trailing data"},
		{name: "two values", payload: `{"conversationId":"c","sessionId":"s"}{}`, want: "trailing data"},
		{name: "duplicate key", payload: `{"conversationId":"c","sessionId":"s","sessionId":"t"}`, want: `duplicate key "sessionId"`},
		{name: "duplicate nested key", payload: `{"conversationId":"c","sessionId":"s","extra":{"note":"a","note":"b"}}`, want: `duplicate key "note"`},
		{name: "same key in sibling objects is fine", payload: `{"conversationId":"c","sessionId":"s","tags":[{"a":1},{"a":2}]}`},
		{name: "case-variant key", payload: `{"conversationId":"c","sessionId":"s","SEGMENTS":3}`, want: `differs from field "segments" only in case`},
		{name: "case-variant required key", payload: `{"conversationId":"c","SessionId":"s"}`, want: "only in case"},
		{name: "missing required", payload: `{"conversationId":"c"}`, want: "missing required field sessionId"},
		{name: "null required", payload: `{"conversationId":"c","sessionId":null}`, want: "missing required field sessionId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeJSON[sessionEvent]([]byte(tt.payload))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// FuzzDecodeJSON feeds arbitrary bytes to the decode-and-validate path: it
// must never panic, and whatever it accepts must hold its required fields.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []string{`{"conversationId":"c","sessionId":"s"}`, `{"a":{"b":[1,{"c":null}]}}`, `{"sessionId":"s","sessionId":"t"}`, `[]`, `null`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := DecodeJSON[sessionEvent](data)
		if err == nil && (ev.ConversationID == "" && !strings.Contains(string(data), `"conversationId"`)) {
			t.Fatalf("accepted %q without its required field", data)
		}
	})
}
