package runtime

import (
	"crypto/sha256"
	"time"
)

// identityDigits are the 62 characters of a stream identity, as
// nats-server writes its own (getHash).
const identityDigits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// StreamIdentity names one incarnation of a stream: eight characters of a
// hash of its creation time, which is how nats-server tells a recreated
// source stream from the one it replaced (stream.identity). A stream
// deleted and created again restarts its sequences at 1; its messages'
// identities (jetfn.StoredMsgID) and dead-letter IDs carry this, so they
// never name a message of the stream before. Empty for a zero time.
func StreamIdentity(created time.Time) string {
	if created.IsZero() {
		return ""
	}
	sum := sha256.Sum256([]byte(created.UTC().Format(time.RFC3339Nano)))
	out := make([]byte, 8)
	for i := range out {
		out[i] = identityDigits[int(sum[i])%len(identityDigits)]
	}
	return string(out)
}
