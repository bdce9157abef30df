package runtime

// One request to a remote function and the wait for its reply, on an inbox
// of the request's own. nats.go's RequestMsg ends a request at its first
// reply; but a stream that stores the remote subject (one outside the
// manifest: the manifest refuses its own) makes JetStream store every
// request and answer it with a PubAck, which comes first. Read as the
// reply it broke the contract, and every message was dead-lettered after
// the remote had done the work. Here a PubAck is recognised, reported and
// skipped, and the remote's own reply settles the delivery.

import (
	"context"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// exchange publishes req with a fresh inbox as its reply subject and waits
// until ctx ends for the remote's reply, skipping JetStream's PubAcks; it
// returns the stream that answered with one, if any. The server's
// no-responders status, which it sends at once when nothing subscribes to
// the subject, is nats.ErrNoResponders. Subscribing before publishing on
// the same connection means the server knows the inbox before any reply.
func (h *remoteHandler) exchange(ctx context.Context, req *nats.Msg) (reply *nats.Msg, storedBy string, err error) {
	req.Reply = h.nc.NewInbox()
	sub, err := h.nc.SubscribeSync(req.Reply)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = sub.Unsubscribe() }() // fails only on a closed connection, which dropped it already
	if err := h.nc.PublishMsg(req); err != nil {
		return nil, "", err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, storedBy, err
		}
		if isNoResponders(m) {
			return nil, storedBy, nats.ErrNoResponders
		}
		stream, ok := pubAckStream(m)
		if !ok {
			return m, storedBy, nil
		}
		storedBy = stream
		h.reportStoredBy(stream)
	}
}

// isNoResponders reports whether m is the server's 503 status for a
// request nothing subscribes to, as nats.go's own request reads it.
func isNoResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") == "503"
}

// pubAckStream is the stream a JetStream PubAck names, success or error
// alike (both carry "stream"): a reply without a micro error header whose
// body is a JSON object with a string member "stream" and no "outputs". No
// reply that keeps the remote contract looks like that, since a success
// body's unknown members are refused.
func pubAckStream(m *nats.Msg) (string, bool) {
	if m.Header.Get(micro.ErrorCodeHeader) != "" || jsontext.Value(m.Data).Kind() != '{' {
		return "", false
	}
	var ack struct {
		Stream  *string        `json:"stream"`
		Outputs jsontext.Value `json:"outputs"`
	}
	if err := json.Unmarshal(m.Data, &ack); err != nil || ack.Stream == nil || ack.Outputs != nil {
		return "", false
	}
	return *ack.Stream, true
}

// reportStoredBy logs, once per stream and binding, that a stream stores
// the remote subject: the requests still work, but the stream keeps a copy
// of every one (payload and headers), which nobody meant.
func (h *remoteHandler) reportStoredBy(stream string) {
	if _, seen := h.storedBy.LoadOrStore(stream, true); seen {
		return
	}
	h.log.Warn("a stream outside the manifest stores the remote subject: JetStream answers every request with a "+
		"PubAck, which jetfn skips to wait for the remote's reply, and keeps a copy of every request; remove the "+
		"subject from the stream (jetfn check --server refuses it)", "remote", h.subject, "stream", stream)
}
