package runtime

import (
	"strings"
	"testing"

	"github.com/jetfn/jetfn"
)

func TestCheckEdge(t *testing.T) {
	tests := []struct {
		name   string
		msg    jetfn.Msg
		want   string
		maxLen int
	}{
		{name: "within limits", msg: jetfn.Msg{Data: []byte("12345"), Header: map[string][]string{"Nats-Msg-Id": {"a:b"}}}, maxLen: 5},
		{name: "payload too large", msg: jetfn.Msg{Data: []byte("123456")}, maxLen: 5, want: "payload of 6 bytes exceeds maxPayload 5"},
		{name: "control character in message ID", msg: jetfn.Msg{Header: map[string][]string{"Nats-Msg-Id": {"a\x00b"}}}, maxLen: 5, want: "header Nats-Msg-Id holds a control character"},
		{name: "tab in a header", msg: jetfn.Msg{Header: map[string][]string{"X-Trace": {"a\tb"}}}, maxLen: 5, want: "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkEdge(tt.msg, tt.maxLen)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "malformed") {
				t.Fatalf("err = %v, want a malformed error with %q", err, tt.want)
			}
		})
	}
}
