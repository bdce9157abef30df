package summarizesession

import (
	"strings"
	"testing"

	"github.com/jetfn/jetfn/events"
)

// FuzzDecodeSessionEnded runs arbitrary payloads through the function's
// decode path (events.SessionEndedPayload, which its handler uses): it must
// never panic, and what it accepts must be safe to use as a key and a
// Nats-Msg-Id. The seed corpus is kept in testdata/fuzz.
func FuzzDecodeSessionEnded(f *testing.F) {
	f.Add([]byte(`{"conversationId":"c1","sessionId":"s1","publishedSegments":12}`))
	f.Add([]byte(`{"conversationId":"c1","sessionId":"s1","publishedSegments":-1}`))
	f.Add([]byte(`{"conversationId":"c.1","sessionId":"s1","publishedSegments":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := events.SessionEndedPayload.Decode(data)
		if err != nil {
			return
		}
		if ev.ConversationID == "" || ev.SessionID == "" || ev.PublishedSegments < 0 {
			t.Fatalf("accepted %q as %+v", data, ev)
		}
		if key := events.SummaryKey(ev.ConversationID, ev.SessionID); strings.ContainsAny(key, ".*> \t\r\n\x00") {
			t.Fatalf("accepted %q, whose key %q holds a subject token or control character", data, key)
		}
	})
}
