// Package discovery asks the NATS micro services of an account about
// themselves ($SRV.INFO, $SRV.STATS) and gathers every answer that arrives
// inside a window: micro has no way to know how many services will answer,
// so a caller waits for as long as it is willing to.
package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Gather publishes one request to subject and returns the data of every
// reply that arrives within window, in arrival order.
func Gather(ctx context.Context, nc *nats.Conn, subject string, window time.Duration) ([][]byte, error) {
	var out [][]byte
	err := GatherEach(ctx, nc, subject, nil, window, func(data []byte) bool {
		out = append(out, data)
		return false
	})
	return out, err
}

// GatherEach publishes one request with body to subject and hands each
// reply's data to each, in arrival order, until window has passed or each
// says it has enough.
func GatherEach(ctx context.Context, nc *nats.Conn, subject string, body []byte, window time.Duration, each func(data []byte) (enough bool)) error {
	replies := make(chan *nats.Msg, 256)
	inbox := nc.NewRespInbox()
	sub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return fmt.Errorf("subscribing to replies: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, body); err != nil {
		return fmt.Errorf("requesting %s: %w", subject, err)
	}
	timer := time.NewTimer(window)
	defer timer.Stop()
	for {
		select {
		case msg := <-replies:
			if each(msg.Data) {
				return nil
			}
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Infos is every service's $SRV.INFO answer within window.
func Infos(ctx context.Context, nc *nats.Conn, window time.Duration) ([]micro.Info, error) {
	replies, err := Gather(ctx, nc, "$SRV.INFO", window)
	if err != nil {
		return nil, err
	}
	out := make([]micro.Info, 0, len(replies))
	for _, data := range replies {
		var info micro.Info
		if json.Unmarshal(data, &info) == nil && info.Name != "" {
			out = append(out, info)
		}
	}
	return out, nil
}

// Serving keeps the service instances with an endpoint on subject.
func Serving(infos []micro.Info, subject string) []micro.Info {
	var out []micro.Info
	for _, info := range infos {
		for _, ep := range info.Endpoints {
			if ep.Subject == subject {
				out = append(out, info)
				break
			}
		}
	}
	return out
}
