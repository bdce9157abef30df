package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers the runtime adds to a dead letter, beside the original's own.
const (
	HeaderFunction        = "Jetfn-Function"
	HeaderOriginalSubject = "Jetfn-Original-Subject"
	HeaderOriginalStream  = "Jetfn-Original-Stream"
	HeaderStreamSequence  = "Jetfn-Stream-Sequence"
	HeaderNumDelivered    = "Jetfn-Num-Delivered"
	HeaderError           = "Jetfn-Error"
	// HeaderOriginalMsgID keeps the original Nats-Msg-Id, which the dead
	// letter's own ID replaces.
	HeaderOriginalMsgID = "Jetfn-Original-Msg-Id"
)

// deadLetter is one message on its way to the dead-letter stream.
type deadLetter struct {
	function     string
	stream       string
	subject      string
	sequence     uint64
	numDelivered uint64
	data         []byte
	header       nats.Header
	reason       string
}

// msgID is <function>:<stream>:<sequence>: the stream drops a second dead
// letter of one function for the same message, so a crash in the middle of
// dead-lettering cannot make two, while two functions reading one stream
// each keep a record of their own.
func (d deadLetter) msgID() string {
	return DeadLetterMsgID(d.function, d.stream, d.sequence)
}

// DeadLetterMsgID is the Nats-Msg-Id of a function's dead letter for the
// message at sequence seq of stream.
func DeadLetterMsgID(function, stream string, seq uint64) string {
	return function + ":" + stream + ":" + strconv.FormatUint(seq, 10)
}

func (d deadLetter) natsMsg(subject string) *nats.Msg {
	h := nats.Header{}
	for k, v := range d.header {
		// Expectations (Nats-Expected-Stream, -Last-Sequence, …) were for
		// the original's stream; kept, DEADLETTER would refuse the copy.
		if strings.HasPrefix(k, "Nats-Expected-") {
			continue
		}
		h[k] = append([]string(nil), v...)
	}
	if id := h.Get(jetstream.MsgIDHeader); id != "" {
		h.Set(HeaderOriginalMsgID, id)
	}
	h.Set(jetstream.MsgIDHeader, d.msgID())
	h.Set(HeaderFunction, d.function)
	h.Set(HeaderOriginalSubject, d.subject)
	h.Set(HeaderOriginalStream, d.stream)
	h.Set(HeaderStreamSequence, strconv.FormatUint(d.sequence, 10))
	h.Set(HeaderNumDelivered, strconv.FormatUint(d.numDelivered, 10))
	h.Set(HeaderError, headerValue(d.reason))
	return &nats.Msg{Subject: subject, Data: d.data, Header: h}
}

// publishDeadLetter stores d on the dead-letter subject and waits for the
// stream's acknowledgement; only then may the original be Term'd.
func publishDeadLetter(ctx context.Context, js jetstream.JetStream, subject string, d deadLetter) error {
	if _, err := js.PublishMsg(ctx, d.natsMsg(subject)); err != nil {
		return fmt.Errorf("dead-lettering %s: %w", d.msgID(), err)
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
