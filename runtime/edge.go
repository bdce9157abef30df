package runtime

import (
	"fmt"
	"strings"

	"github.com/jetfn/jetfn"
)

// checkEdge refuses what must never reach a handler: a payload larger than
// the function's maxPayload (refused before anything decodes it) and
// headers with control characters, which a log line or a downstream
// protocol could misread. Both make the message malformed.
func checkEdge(msg jetfn.Msg, maxPayload int) error {
	if len(msg.Data) > maxPayload {
		return jetfn.Malformed(fmt.Errorf("payload of %d bytes exceeds maxPayload %d", len(msg.Data), maxPayload))
	}
	for key, values := range msg.Header {
		if hasControl(key) {
			return jetfn.Malformed(fmt.Errorf("header name %q holds a control character", key))
		}
		for _, v := range values {
			if hasControl(v) {
				return jetfn.Malformed(fmt.Errorf("header %s holds a control character", key))
			}
		}
	}
	return nil
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}
