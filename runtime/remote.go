package runtime

// A remote function's handler: each delivery becomes one NATS request to
// the function's micro endpoint, and the reply (remote_reply.go) becomes
// the handler's result, so the delivery's life in message.go is the same as
// any function's: the keeper heartbeats it while the remote works, the
// timeout bounds the wait, and the result settles it as documented on
// jetfn.Handler.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/tracing"
	"github.com/jetfn/jetfn/manifest"
)

// The headers jetfn adds to a remote function's request, beside the
// message's own (HeaderFunction, Jetfn-Function, is the first).
const (
	HeaderRemoteStream    = "Jetfn-Stream"
	HeaderRemoteStreamSeq = "Jetfn-Stream-Seq"
	HeaderRemoteDelivery  = "Jetfn-Delivery"
	HeaderRemoteSubject   = "Jetfn-Subject"
	// HeaderRemoteMsgID is the input's idempotency key (jetfn.Msg.ID), the
	// same on every redelivery: the remote keys its own effects by it.
	HeaderRemoteMsgID = HeaderMsgID
	// HeaderRemoteDeadline is when jetfn stops waiting for the reply, RFC
	// 3339 UTC with milliseconds.
	HeaderRemoteDeadline = "Jetfn-Deadline"
)

// remoteDeadlineLayout is RFC 3339 in UTC with exactly three fractional
// digits, which every language's date parser reads.
const remoteDeadlineLayout = "2006-01-02T15:04:05.000Z07:00"

// remoteHandler sends each delivery to a micro endpoint and turns the reply
// into the result that settles it.
type remoteHandler struct {
	nc        *nats.Conn
	function  string
	subject   string
	outputs   []string
	publisher jetfn.Publisher
	state     *remoteState
}

var _ jetfn.Handler = (*remoteHandler)(nil)

func newRemoteHandler(nc *nats.Conn, spec manifest.FunctionSpec, pub jetfn.Publisher) *remoteHandler {
	return &remoteHandler{nc: nc, function: spec.Name, subject: spec.Remote.Subject, outputs: spec.OutputSubjects(),
		publisher: pub, state: newRemoteState(spec.Remote.Subject)}
}

// Handle sends one request and waits for its reply until the run's
// deadline (the function's timeout), exactly: the Jetfn-Deadline header
// promises the remote that moment. The reply's outputs are published
// through the function's Publisher, in order, before the message is acked.
func (h *remoteHandler) Handle(ctx context.Context, msg jetfn.Msg) error {
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	reply, err := h.nc.RequestMsgWithContext(ctx, h.request(ctx, msg, deadline))
	if err != nil {
		return h.requestFailed(err, deadline)
	}
	h.state.replied()
	outputs, err := readReply(reply, h.subject, h.outputs)
	if err != nil {
		return err
	}
	for _, o := range outputs {
		if err := h.publisher.Publish(ctx, o.subject, o.data, o.key); err != nil {
			return fmt.Errorf("publishing output %s of remote %s: %w", o.subject, h.subject, err)
		}
	}
	return nil
}

// request is the delivery as the remote sees it: the payload unchanged, the
// message's own headers, and jetfn's (which win over a publisher's of the
// same name). With tracing on, its traceparent names the run's span, so the
// remote's spans are children of jetfn's "process" span; off, the
// publisher's trace headers pass as they came.
func (h *remoteHandler) request(ctx context.Context, msg jetfn.Msg, deadline time.Time) *nats.Msg {
	header := make(nats.Header, len(msg.Header)+7)
	maps.Copy(header, nats.Header(msg.Header))
	header.Set(HeaderFunction, h.function)
	header.Set(HeaderRemoteStream, msg.Stream)
	header.Set(HeaderRemoteStreamSeq, strconv.FormatUint(msg.StreamSequence, 10))
	header.Set(HeaderRemoteDelivery, strconv.FormatUint(msg.NumDelivered, 10))
	header.Set(HeaderRemoteSubject, msg.Subject)
	header.Set(HeaderRemoteMsgID, msg.ID())
	if !deadline.IsZero() {
		header.Set(HeaderRemoteDeadline, deadline.UTC().Format(remoteDeadlineLayout))
	}
	return &nats.Msg{Subject: h.subject, Data: msg.Data, Header: tracing.Inject(ctx, header)}
}

// requestFailed is the result of a request that got no reply: every case
// is retried on the backoff (dead-lettered on the last delivery), since
// the remote may come back.
func (h *remoteHandler) requestFailed(err error, deadline time.Time) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		h.state.noResponders()
		return fmt.Errorf("remote %s: no responders (no instance of its micro service is running)", h.subject)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("remote %s: no reply before the deadline %s", h.subject, deadline.UTC().Format(remoteDeadlineLayout))
	}
	return fmt.Errorf("requesting remote %s: %w", h.subject, err)
}
