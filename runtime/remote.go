package runtime

// A remote function's handler: each delivery becomes one NATS request to
// the function's micro endpoint, and the reply (remote_reply.go) becomes
// the handler's result, so the delivery's life in delivery.go is the same as
// any function's: the keeper heartbeats it while the remote works, the
// timeout bounds the wait, and the result settles it as documented on
// jetfn.Handler.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/tracing"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
)

// remoteRequestHeaders are the headers jetfn sets on every request. A
// publisher's header with one of these names in any case is dropped: NATS
// headers are case-sensitive, so jetfn-msg-id would otherwise reach the
// remote beside Jetfn-Msg-Id, and a remote that reads headers
// case-insensitively (as HTTP does) could take the publisher's.
var remoteRequestHeaders = []string{wire.HeaderFunction, wire.HeaderRemoteStream, wire.HeaderRemoteStreamSeq, wire.HeaderRemoteDelivery,
	wire.HeaderRemoteSubject, wire.HeaderRemoteMsgID, wire.HeaderRemoteDeadline}

// remoteDeadlineLayout is RFC 3339 in UTC with exactly three fractional
// digits, which every language's date parser reads.
const remoteDeadlineLayout = "2006-01-02T15:04:05.000Z07:00"

// remoteReplyMargin is how much of a run's timeout jetfn keeps after the
// remote's deadline to publish the reply's outputs: a tenth of the
// timeout, at least 100ms (a few publish round trips on a loaded
// machine), at most publishTimeout (one publish attempt's own bound), and
// never more than half the timeout, so a short one leaves the remote half.
func remoteReplyMargin(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 100*time.Millisecond), timeout/2, publishTimeout)
}

// remoteHandler sends each delivery to a micro endpoint and turns the reply
// into the result that settles it.
type remoteHandler struct {
	nc            *nats.Conn
	function      string
	subject       string
	outputs       []string
	delayed       []string
	timeout       time.Duration
	maxRetryAfter time.Duration
	publisher     jetfn.Publisher
	log           *slog.Logger
	state         *remoteState
	// storedBy remembers the streams already reported for storing the
	// remote subject, so each is logged once per binding.
	storedBy sync.Map
}

var _ jetfn.Handler = (*remoteHandler)(nil)

func newRemoteHandler(nc *nats.Conn, spec manifest.FunctionSpec, deps jetfn.Deps) *remoteHandler {
	return &remoteHandler{nc: nc, function: spec.Name, subject: spec.Remote.Subject, outputs: spec.OutputSubjects(), delayed: spec.DelayedOutputSubjects(),
		timeout: spec.Timeout, maxRetryAfter: spec.RetryAfterBound(), publisher: deps.Publisher, log: deps.Logger,
		state: newRemoteState(spec.Remote.Subject)}
}

// Handle sends one request and waits for its reply until the deadline it
// promises the remote in Jetfn-Deadline: remoteReplyMargin before the
// run's own deadline (the function's timeout), which the margin leaves for
// publishing the reply's outputs through the function's Publisher, in
// order, before the message is acked.
func (h *remoteHandler) Handle(ctx context.Context, msg jetfn.Msg) error {
	var deadline time.Time
	waitCtx := ctx
	if runDeadline, ok := ctx.Deadline(); ok {
		deadline = runDeadline.Add(-remoteReplyMargin(h.timeout))
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	req := h.request(ctx, msg, deadline)
	reply, storedBy, err := h.exchange(waitCtx, req)
	if err != nil {
		return h.requestFailed(err, req, deadline, storedBy)
	}
	h.state.replied()
	outputs, err := readReply(reply, h.subject, h.outputs, h.maxRetryAfter)
	if err == nil {
		err = h.checkDelays(outputs)
	}
	if err != nil {
		return err
	}
	for _, o := range outputs {
		if o.at.IsZero() {
			err = h.publisher.Publish(ctx, o.subject, o.data, o.key)
		} else {
			err = h.publisher.PublishAt(ctx, o.subject, o.data, o.key, o.at)
		}
		if err != nil {
			return fmt.Errorf("publishing output %s of remote %s: %w", o.subject, h.subject, err)
		}
	}
	return nil
}

// checkDelays refuses, before anything is published, a reply that delays
// an output the manifest does not declare delayed.
func (h *remoteHandler) checkDelays(outputs []remoteOutput) error {
	for i, o := range outputs {
		if !o.at.IsZero() && !manifest.CoveredByAny(o.subject, h.delayed) {
			return jetfn.Malformed(fmt.Errorf("remote %s broke the reply contract: outputs[%d]: %w: %s is not declared delayed: true",
				h.subject, i, jetfn.ErrUndelayedOutput, o.subject))
		}
	}
	return nil
}

// request is the delivery as the remote sees it: the payload unchanged, the
// message's own headers, and jetfn's, which replace a publisher's header of
// the same name in any case. With tracing on, its traceparent names the
// run's span, so the remote's spans are children of jetfn's "process"
// span; off, the publisher's trace headers pass as they came.
func (h *remoteHandler) request(ctx context.Context, msg jetfn.Msg, deadline time.Time) *nats.Msg {
	own := make(nats.Header, len(remoteRequestHeaders)+2)
	own.Set(wire.HeaderFunction, h.function)
	own.Set(wire.HeaderRemoteStream, msg.Stream)
	own.Set(wire.HeaderRemoteStreamSeq, strconv.FormatUint(msg.StreamSequence, 10))
	own.Set(wire.HeaderRemoteDelivery, strconv.FormatUint(msg.NumDelivered, 10))
	own.Set(wire.HeaderRemoteSubject, msg.Subject)
	own.Set(wire.HeaderRemoteMsgID, msg.ID())
	if !deadline.IsZero() {
		own.Set(wire.HeaderRemoteDeadline, deadline.UTC().Format(remoteDeadlineLayout))
	}
	own = tracing.Inject(ctx, own)
	header := make(nats.Header, len(msg.Header)+len(own))
	for k, v := range msg.Header {
		if !jetfnsHeader(k, own) {
			header[k] = v
		}
	}
	maps.Copy(header, own)
	return &nats.Msg{Subject: h.subject, Data: msg.Data, Header: header}
}

// jetfnsHeader reports whether key names, in any case, a header jetfn sets
// on a request: one of remoteRequestHeaders or one in own (trace context).
func jetfnsHeader(key string, own nats.Header) bool {
	for name := range own {
		if strings.EqualFold(key, name) {
			return true
		}
	}
	return slices.ContainsFunc(remoteRequestHeaders, func(name string) bool { return strings.EqualFold(key, name) })
}

// requestFailed is the result of a request that got no reply. A request
// larger than the server's max_payload is permanent: it fails the same way
// on every delivery. Every other case is retried on the backoff
// (dead-lettered on the last delivery), since the remote may come back.
func (h *remoteHandler) requestFailed(err error, req *nats.Msg, deadline time.Time, storedBy string) error {
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return jetfn.Permanent(fmt.Errorf("remote %s: the request (a payload of %d bytes and %d headers) exceeds the "+
			"server's max_payload of %d bytes, so no delivery can send it", h.subject, len(req.Data), len(req.Header),
			h.nc.MaxPayload()))
	case errors.Is(err, nats.ErrNoResponders):
		h.state.noResponders()
		return fmt.Errorf("remote %s: no responders (no instance of its micro service is running)", h.subject)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		err := fmt.Errorf("remote %s: no reply before the deadline %s", h.subject, deadline.UTC().Format(remoteDeadlineLayout))
		if storedBy != "" {
			err = fmt.Errorf("%w (stream %s stores the remote subject and answered with a PubAck, which is not the remote's reply)",
				err, storedBy)
		}
		return err
	}
	return fmt.Errorf("requesting remote %s: %w", h.subject, err)
}
