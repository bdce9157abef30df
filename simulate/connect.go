package simulate

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/natsconn"
)

// ErrNoNATS is returned by a simulation without a NATS URL: it needs a
// stack to play against.
var ErrNoNATS = errors.New("needs NATS_URL")

// connect opens a connection of the simulation's own (to watch for what
// jetfn announces) with the same settings as its publisher.
func connect(natsURL string, settings natsconn.Settings, name string) (*nats.Conn, error) {
	opts, err := settings.Options()
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	nc, err := nats.Connect(natsURL, append(opts, nats.Name(name))...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	return nc, nil
}
