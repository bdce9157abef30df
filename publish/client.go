package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/internal/tracing"
)

// DefaultTimeout bounds one publish, so a NATS outage delays the caller's own
// work by at most this long.
const DefaultTimeout = 2 * time.Second

// Client publishes JSON events to JetStream with a message ID. It is safe
// to use from many goroutines. A Client made without a NATS URL is a no-op,
// so a service runs locally and in tests without NATS.
type Client struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	timeout time.Duration
}

// Connect returns a Client for url, connected as opts say (WithSettings:
// credentials and TLS). With url empty it returns a no-op Client and logs
// that once at debug level. The connection is made in the background
// (RetryOnFailedConnect), so a NATS server that is down at start does not
// stop the caller: its publishes fail, are logged and returned, and succeed
// again once the server is back. Settings that cannot work (a missing
// file, two credentials) fail Connect at once.
func Connect(url string, log *slog.Logger, opts ...Option) (*Client, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{log: log, timeout: DefaultTimeout}
	if url == "" {
		log.Debug("NATS_URL is not set; events will not be published")
		return c, nil
	}
	cfg := connectConfig{nats: []nats.Option{nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.Name("jetfn-publisher")}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("connecting to NATS: %w", err)
		}
	}
	nc, err := nats.Connect(url, cfg.nats...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	c.nc, c.js = nc, js
	return c, nil
}

// Enabled reports whether the Client publishes at all.
func (c *Client) Enabled() bool { return c != nil && c.js != nil }

// Close drains the connection; a no-op Client has nothing to close.
func (c *Client) Close() {
	if c.Enabled() {
		_ = c.nc.Drain()
	}
}

// PublishJSON marshals v and publishes it to subject with msgID as its
// Nats-Msg-Id, waiting at most the Client's timeout for the stream's
// acknowledgement. An error is logged and returned; it never panics. The
// events of package events are published with their Payload's Encode
// instead, which checks them against their schema.
func (c *Client) PublishJSON(ctx context.Context, subject string, v any, msgID string) error {
	return c.publish(ctx, subject, msgID, func() ([]byte, error) { return json.Marshal(v) })
}

// publish publishes what encode returns, as PublishJSON does.
func (c *Client) publish(ctx context.Context, subject, msgID string, encode func() ([]byte, error)) (err error) {
	if !c.Enabled() {
		return nil
	}
	if msgID == "" {
		return ErrNoMsgID
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("publishing to %s: panic: %v", subject, r)
		}
		if err != nil {
			c.log.Error("publishing event", "subject", subject, "msg_id", msgID, "err", err)
		}
	}()
	data, err := encode()
	if err != nil {
		return fmt.Errorf("encoding event for %s: %w", subject, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// The caller's span, if any, travels in traceparent: the runtime's
	// span for the function that takes this message continues its trace.
	msg := &nats.Msg{Subject: subject, Data: data, Header: tracing.Inject(ctx, nil)}
	_, err = c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
	if err != nil {
		return fmt.Errorf("publishing to %s: %w", subject, err)
	}
	return nil
}

// bytesOf is an encode func for JSON encoded already.
func bytesOf(data []byte) func() ([]byte, error) {
	return func() ([]byte, error) { return data, nil }
}
