package runtime

import (
	"fmt"
	"strings"
)

// DefaultMaxPayload is the largest payload a function accepts unless its
// manifest entry says otherwise.
const DefaultMaxPayload = 1 << 20

// checkEdge refuses what must never reach a handler: a payload larger than
// the function's maxPayload (refused before anything decodes it) and
// headers with control characters, which a log line or a downstream
// protocol could misread. Both make the message malformed.
func checkEdge(msg Msg, maxPayload int) error {
	if len(msg.Data) > maxPayload {
		return Malformed(fmt.Errorf("payload of %d bytes exceeds maxPayload %d", len(msg.Data), maxPayload))
	}
	for key, values := range msg.Header {
		if hasControl(key) {
			return Malformed(fmt.Errorf("header name %q holds a control character", key))
		}
		for _, v := range values {
			if hasControl(v) {
				return Malformed(fmt.Errorf("header %s holds a control character", key))
			}
		}
	}
	return nil
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}
