package publishrecordingevent

import (
	"strings"
	"testing"

	"github.com/jetfn/jetfn/events"
)

// FuzzDecodeRecordingEvent runs arbitrary payloads through the function's
// decode path (events.RecordingEventPayload, which its handler uses): it
// must never panic, and what it accepts must make a safe subject and
// Nats-Msg-Id. The seed corpus is kept in testdata/fuzz.
func FuzzDecodeRecordingEvent(f *testing.F) {
	f.Add([]byte(`{"ts":1700000000000,"event":"started","recordingId":"r1","conversationId":"c1"}`))
	f.Add([]byte(`{"ts":1700000000000,"event":"deleted","recordingId":"r1","conversationId":"c1","reason":"never-started","extra":{"a":[1,2]}}`))
	f.Add([]byte(`{"ts":0,"event":"failed","recordingId":"r>1","conversationId":"c1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := events.RecordingEventPayload.Decode(data)
		if err != nil {
			return
		}
		if ev.TS <= 0 || !ev.Event.Known() || (ev.Event == events.RecordingDeleted && ev.Reason == "") {
			t.Fatalf("accepted %q as %+v", data, ev)
		}
		for _, s := range []string{ev.Subject(), events.RecordingNoticeSubject(ev.ConversationID)} {
			if strings.ContainsAny(s, "*> \t\r\n\x00") || strings.Contains(s, "..") {
				t.Fatalf("accepted %q, whose subject %q is unsafe", data, s)
			}
		}
		if strings.ContainsAny(ev.MsgID(), "\r\n\x00") {
			t.Fatalf("accepted %q, whose message ID %q is unsafe", data, ev.MsgID())
		}
	})
}
