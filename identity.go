package jetfn

import (
	"strconv"
	"strings"
)

// HeaderReplayOf, on a message that `jetfn dlq replay` republished, is the
// identity (Msg.ID) of the message that was dead-lettered. The copy needs
// a Nats-Msg-Id of its own to get past the input stream's duplicate
// window, which still remembers the original's; with this header the
// function still sees the original's identity, so an effect or output
// keyed by it is not made a second time.
const HeaderReplayOf = "Jetfn-Replay-Of"

// replayInfix separates a replayed copy's Nats-Msg-Id from its attempt
// number: <identity>:replay:<n>.
const replayInfix = ":replay:"

// ReplayMsgID is the Nats-Msg-Id of the n-th replay (from 1) of the message
// whose identity is id.
func ReplayMsgID(id string, n uint64) string {
	return id + replayInfix + strconv.FormatUint(n, 10)
}

// ReplayAttempt is n when msgID is ReplayMsgID(id, n), else 0.
func ReplayAttempt(msgID, id string) uint64 {
	rest, ok := strings.CutPrefix(msgID, id+replayInfix)
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// StoredMsgID names the message stored at seq in one incarnation of a
// stream: "<stream>@<identity>:<seq>", or "<stream>:<seq>" when the
// stream's identity is unknown. A stream deleted and created again
// restarts its sequences at 1, so without the identity two messages would
// share a name.
func StoredMsgID(stream, streamIdentity string, seq uint64) string {
	s := strconv.FormatUint(seq, 10)
	if streamIdentity == "" {
		return stream + ":" + s
	}
	return stream + "@" + streamIdentity + ":" + s
}

// ID names the message, the same on every redelivery, and across a
// replay of its dead letter:
//   - on a replayed copy, the original's identity (HeaderReplayOf, honoured
//     only together with the Nats-Msg-Id the replay gave the copy);
//   - else the publisher's Nats-Msg-Id, when it set one;
//   - else StoredMsgID(Stream, StreamIdentity, StreamSequence).
//
// An output keyed by it (or by a field that names the request) is stored
// once however often the input is delivered, and two different inputs
// never share an output.
func (m Msg) ID() string {
	id := m.Header.Get("Nats-Msg-Id")
	if orig := m.Header.Get(HeaderReplayOf); orig != "" && ReplayAttempt(id, orig) > 0 {
		return orig
	}
	if id != "" {
		return id
	}
	return StoredMsgID(m.Stream, m.StreamIdentity, m.StreamSequence)
}
