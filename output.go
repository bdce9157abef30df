package jetfn

import "fmt"

// OutputMsgID is the Nats-Msg-Id a function's Publisher sends for an output
// published with key: "jetfn:<function>:<subject>:<key>". A stream remembers
// message IDs across all its subjects, so a bare key could be the very ID an
// input publisher chose (TRANSCRIPTION stores session-ended and
// transcript.processed alike) and the stream would drop the output as its
// duplicate. Scoped, no ID another publisher picks by its own rules can
// collide, while a retry of the same output still dedups.
//
// NoDedup gives no ID. An empty key is refused with ErrNoOutputKey, a
// permanent failure (see Publisher).
func OutputMsgID(function, subject, key string) (string, error) {
	switch key {
	case NoDedup:
		return "", nil
	case "":
		return "", Permanent(fmt.Errorf("%w: function %s published to %s with an empty key; derive one from the input "+
			"(msg.ID()) or pass jetfn.NoDedup", ErrNoOutputKey, function, subject))
	}
	return "jetfn:" + function + ":" + subject + ":" + key, nil
}
