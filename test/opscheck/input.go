package opscheck

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// Family says which function an input is for: the remote one (effects
// keyed by Jetfn-Msg-Id, so an identity change makes a second document)
// or the in-process publish-recording-event (effects keyed by the event's
// content).
type Family string

// The two families.
const (
	Remote    Family = "remote"
	Recording Family = "recording"
)

// Mode is how a publisher sends an input.
type Mode string

// The publishers.
const (
	// Careful sets a unique Nats-Msg-Id and retries with it until a PubAck.
	Careful Mode = "careful"
	// Bare sets no message ID and sends once; a failed send is not retried.
	Bare Mode = "bare"
	// Double sends the same payload twice without a message ID.
	Double Mode = "double"
	// Resend sends an earlier careful input again, same ID, a while later
	// (a publisher that restarted and sends its last message again).
	Resend Mode = "resend"
)

// Poison is how an input is refused by its function, if it is.
type Poison string

// The poison kinds.
const (
	Good Poison = ""
	// Schema is a payload the function's contract refuses.
	Schema Poison = "schema"
	// Empty is an empty body.
	Empty Poison = "empty"
	// Status is an empty body with a Status header, as a careless bridge
	// that forwards an HTTP response's headers might send.
	Status Poison = "status"
)

// tokenHeader carries the input's token, so an input with an empty body
// can be traced too; a dead letter keeps the original's headers.
const tokenHeader = "Opscheck-Token"

// recordingTS is the ts of the first input; input n's recording event has
// ts recordingTS+n. ts is part of the event's identity
// (<recordingId>:<event>:<ts>), so the input's number makes each event
// distinct within its recording, and recordingToken finds the input again
// from a timeline entry or a notice, which carry only the identity.
const recordingTS = 1_700_000_000_000

// recordings is how many recordings a run's recording inputs are spread
// over, round robin: several events of one recording wait or run at once
// whenever a fault holds one, which is what the order check needs (an
// ordered function must still handle them one at a time, in stream order).
const recordings = 4

// recordingID is the recordingId of recording k of the run of seed.
func recordingID(seed uint64, k int) string { return fmt.Sprintf("s%d-rec%d", seed, k) }

// recordingToken is the token of the input whose event is ts in recording
// recID (recordingID's form), or "" when they are not an input's.
func recordingToken(recID string, ts int64) string {
	seed, _, ok := strings.Cut(recID, "-rec")
	if !ok || ts <= recordingTS {
		return ""
	}
	return fmt.Sprintf("%s-%04d", seed, ts-recordingTS)
}

// Input is one message a publisher means to send. Token is unique to it
// and appears in its payload, in every document its function stores and in
// every output, so each can be traced back to exactly one input.
type Input struct {
	Token   string
	Family  Family
	Subject string
	Poison  Poison
	// MsgID is the careful publisher's Nats-Msg-Id.
	MsgID string
	// Tab adds a header whose value holds a TAB, as a careless publisher
	// copying a free-text field into a header might.
	Tab bool
	// RecordingID is a recording input's recording, shared with other
	// inputs; TS its event's ts, the input's own.
	RecordingID string
	TS          int64
}

func (in *Input) event() string { return strings.TrimPrefix(in.Subject, "recording.") }

// Msg builds the message; withID sets the Nats-Msg-Id.
func (in *Input) Msg(withID bool) *nats.Msg {
	m := &nats.Msg{Subject: in.Subject, Header: nats.Header{tokenHeader: {in.Token}}, Data: in.payload()}
	if withID {
		m.Header.Set(nats.MsgIdHdr, in.MsgID)
	}
	if in.Poison == Status {
		m.Header.Set("Status", "100")
		m.Header.Set("Description", "forwarded by a careless bridge")
	}
	if in.Tab {
		m.Header.Set("Opscheck-Note", "careless\tpublisher")
	}
	return m
}

func (in *Input) payload() []byte {
	if in.Poison == Empty || in.Poison == Status {
		return nil
	}
	var v any
	switch {
	case in.Family == Remote && in.Poison == Good:
		v = map[string]string{"name": in.Token}
	case in.Family == Remote:
		v = map[string]string{"nome": in.Token}
	default:
		v = map[string]any{"ts": in.TS, "event": in.event(), "recordingId": in.RecordingID, "conversationId": "opscheck"}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

// newInput makes the input numbered n of the run; rec is a recording
// input's recording (recordingID).
func newInput(seed uint64, n int, fam Family, subject string, poison Poison, rec int) *Input {
	tok := fmt.Sprintf("s%d-%04d", seed, n)
	in := &Input{Token: tok, Family: fam, Subject: subject, Poison: poison}
	in.MsgID = "pub-" + tok
	if fam == Recording {
		in.RecordingID, in.TS = recordingID(seed, rec), recordingTS+int64(n)
		if poison == Schema {
			// The schema's minimum is 1. Negative, and the input's own: the
			// event's identity (its Nats-Msg-Id) stays unique, as the
			// recording is shared.
			in.TS = -int64(n)
		}
		in.MsgID = fmt.Sprintf("%s:%s:%d", in.RecordingID, in.event(), in.TS) // the backend's key
	}
	return in
}
