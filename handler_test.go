package jetfn_test

import (
	"testing"

	"github.com/jetfn/jetfn"
)

func TestMsgID(t *testing.T) {
	tests := []struct {
		name string
		msg  jetfn.Msg
		want string
	}{
		{name: "the publisher's message ID", msg: jetfn.Msg{Header: jetfn.Header{"Nats-Msg-Id": {"c1:s1:ended"}}, Stream: "S", StreamSequence: 7}, want: "c1:s1:ended"},
		{name: "the stored message without one, stream identity unknown", msg: jetfn.Msg{Stream: "TRANSCRIPTION", StreamSequence: 42}, want: "TRANSCRIPTION:42"},
		{name: "the stored message without one", msg: jetfn.Msg{Stream: "TRANSCRIPTION", StreamIdentity: "Ab3dEf9x", StreamSequence: 42}, want: "TRANSCRIPTION@Ab3dEf9x:42"},
		{name: "a replayed copy keeps the original's identity", want: "c1:s1:ended",
			msg: jetfn.Msg{Header: jetfn.Header{"Nats-Msg-Id": {"c1:s1:ended:replay:2"}, jetfn.HeaderReplayOf: {"c1:s1:ended"}}, Stream: "S", StreamSequence: 9}},
		{name: "a replay-of header the message ID does not match is ignored", want: "other",
			msg: jetfn.Msg{Header: jetfn.Header{"Nats-Msg-Id": {"other"}, jetfn.HeaderReplayOf: {"c1:s1:ended"}}, Stream: "S", StreamSequence: 9}},
		{name: "a replay-of header without a message ID is ignored", want: "S@x:9",
			msg: jetfn.Msg{Header: jetfn.Header{jetfn.HeaderReplayOf: {"c1:s1:ended"}}, Stream: "S", StreamIdentity: "x", StreamSequence: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.msg.ID(); got != tt.want {
				t.Errorf("ID() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReplayAttempt(t *testing.T) {
	tests := []struct {
		name, msgID, id string
		want            uint64
	}{
		{name: "a replay", msgID: jetfn.ReplayMsgID("S@x:1", 3), id: "S@x:1", want: 3},
		{name: "another message's replay", msgID: "S@x:12:replay:1", id: "S@x:1", want: 0},
		{name: "not a number", msgID: "a:replay:b", id: "a", want: 0},
		{name: "the original itself", msgID: "a", id: "a", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jetfn.ReplayAttempt(tt.msgID, tt.id); got != tt.want {
				t.Errorf("ReplayAttempt(%q, %q) = %d, want %d", tt.msgID, tt.id, got, tt.want)
			}
		})
	}
}
