package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/wire"
)

// deadLetter is one message on its way to the dead-letter stream.
type deadLetter struct {
	function       string
	scope          string
	stream         string
	streamIdentity string
	subject        string
	sequence       uint64
	numDelivered   uint64
	// id is the identity the function saw (jetfn.Msg.ID).
	id     string
	data   []byte
	header nats.Header
	reason string
}

// newDeadLetter is msg's dead letter for function, whose IDs are scoped
// by scope (scope.go), with cause as reason.
func newDeadLetter(function, scope string, msg jetfn.Msg, cause error) deadLetter {
	return deadLetter{
		function: function, scope: scope, stream: msg.Stream, streamIdentity: msg.StreamIdentity, subject: msg.Subject,
		sequence: msg.StreamSequence, numDelivered: msg.NumDelivered, id: msg.ID(),
		data: msg.Data, header: nats.Header(msg.Header), reason: cause.Error(),
	}
}

// msgID is DeadLetterMsgID: the stream drops a second dead letter of one
// function for the same message, so a crash in the middle of
// dead-lettering cannot make two, while two functions reading one stream
// each keep a record of their own.
func (d deadLetter) msgID() string {
	return DeadLetterMsgID(d.scope, d.stream, d.streamIdentity, d.sequence)
}

// DeadLetterMsgID is the Nats-Msg-Id of a function's dead letter for the
// message at sequence seq of the incarnation streamIdentity of stream:
// "<function>:<stream>@<identity>:<seq>" (jetfn.StoredMsgID). The identity
// keeps a stream recreated with sequences from 1 from giving a new
// message's dead letter an old one's ID, which the dead-letter stream
// would drop as a duplicate.
func DeadLetterMsgID(function, stream, streamIdentity string, seq uint64) string {
	return function + ":" + jetfn.StoredMsgID(stream, streamIdentity, seq)
}

func (d deadLetter) natsMsg(subject string) *nats.Msg {
	h := make(nats.Header, len(d.header)+10)
	for k, v := range d.header {
		v = append([]string(nil), v...)
		switch {
		case k == jetstream.MsgIDHeader:
			h[wire.HeaderOriginalMsgID] = v
		case serverInterpreted(k):
			h[wire.HeaderOriginalPrefix+k] = v
		default:
			h[k] = v
		}
	}
	h.Set(jetstream.MsgIDHeader, d.msgID())
	h.Set(wire.HeaderFunction, d.function)
	h.Set(wire.HeaderScope, d.scope)
	h.Set(wire.HeaderOriginalSubject, d.subject)
	h.Set(wire.HeaderOriginalStream, d.stream)
	if d.streamIdentity != "" {
		h.Set(wire.HeaderOriginalStreamIdentity, d.streamIdentity)
	}
	h.Set(wire.HeaderStreamSequence, strconv.FormatUint(d.sequence, 10))
	h.Set(wire.HeaderNumDelivered, strconv.FormatUint(d.numDelivered, 10))
	h.Set(wire.HeaderMsgID, d.id)
	h.Set(wire.HeaderError, headerValue(d.reason))
	return &nats.Msg{Subject: subject, Data: d.data, Header: h}
}

// serverInterpreted reports a header the server may act on: every Nats-*
// header (matched without regard to case) but the message ID, which
// natsMsg keeps apart.
func serverInterpreted(key string) bool {
	return len(key) > 5 && strings.EqualFold(key[:5], "Nats-") && !strings.EqualFold(key, jetstream.MsgIDHeader)
}

// publishDeadLetter stores d on the dead-letter stream and waits for the
// stream's acknowledgement; only then may the original be Term'd. A
// duplicate acknowledgement is success only when the dead letter the
// stream already holds under that ID is this message's (a crash between
// dead-lettering and Term, say): an ID that named another message would
// otherwise Term this one with no record.
//
// A dead letter too large to store (the original's payload near the
// server's max_payload) is stored without the payload, the header
// wire.HeaderPayloadOmitted saying so: kept for redelivery instead, it
// would fail again on every delivery, for ever.
func publishDeadLetter(ctx context.Context, js jetstream.JetStream, subject string, d deadLetter) error {
	ack, err := js.PublishMsg(ctx, d.natsMsg(subject))
	if tooLargeToStore(err) {
		m := d.natsMsg(subject)
		m.Header.Set(wire.HeaderPayloadOmitted, strconv.Itoa(len(m.Data)))
		m.Data = nil
		ack, err = js.PublishMsg(ctx, m)
	}
	if err != nil {
		return fmt.Errorf("dead-lettering %s: %w", d.msgID(), err)
	}
	if !ack.Duplicate {
		return nil
	}
	return d.checkStored(ctx, js, ack)
}

// tooLargeToStore reports a publish refused for its size, by the client
// (the server's max_payload) or by the stream.
func tooLargeToStore(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, nats.ErrMaxPayload) || errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum || apiErr.ErrorCode == errCodeHeaderTooLarge)
}

// checkStored compares the dead letter the stream kept under d's ID with
// d (the same scope: a renamed function's dead letter under its old name
// is its own). One deleted since (a replay deletes what it replayed) cannot be read:
// the ID names d's stream incarnation, function and sequence, so it was
// d's.
func (d deadLetter) checkStored(ctx context.Context, js jetstream.JetStream, ack *jetstream.PubAck) error {
	s, err := js.Stream(ctx, ack.Stream)
	var stored *jetstream.RawStreamMsg
	if err == nil {
		stored, err = s.GetMsg(ctx, ack.Sequence)
	}
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("dead-lettering %s: the stream reported a duplicate, and reading the one it holds failed: %w", d.msgID(), err)
	}
	h := stored.Header
	sameScope := h.Get(wire.HeaderScope) == d.scope || h.Get(wire.HeaderScope) == "" && h.Get(wire.HeaderFunction) == d.scope
	if !sameScope || h.Get(wire.HeaderOriginalStream) != d.stream ||
		h.Get(wire.HeaderStreamSequence) != strconv.FormatUint(d.sequence, 10) ||
		h.Get(wire.HeaderOriginalStreamIdentity) != d.streamIdentity {
		return fmt.Errorf("%w: %s is already the ID of %s message %d (function %s, stream %s sequence %s)",
			ErrDeadLetterIDTaken, d.msgID(), ack.Stream, ack.Sequence, h.Get(wire.HeaderFunction),
			h.Get(wire.HeaderOriginalStream), h.Get(wire.HeaderStreamSequence))
	}
	return nil
}

// maxReasonLen bounds the error header; a reason is for a person to read.
const maxReasonLen = 1024

// headerValue makes an error message safe for a NATS header, where a line
// break would end the header block.
func headerValue(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxReasonLen {
		s = s[:maxReasonLen]
	}
	return s
}
