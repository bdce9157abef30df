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
		{name: "the stored message without one", msg: jetfn.Msg{Stream: "TRANSCRIPTION", StreamSequence: 42}, want: "TRANSCRIPTION:42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.msg.ID(); got != tt.want {
				t.Errorf("ID() = %q, want %q", got, tt.want)
			}
		})
	}
}
