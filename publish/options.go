package publish

import (
	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/natsconn"
)

// Option changes how Connect connects.
type Option func(*connectConfig) error

type connectConfig struct {
	nats []nats.Option
}

// WithSettings connects with s: the credentials (NATS_CREDS,
// NATS_NKEY_SEED, NATS_USER/NATS_PASSWORD, NATS_TOKEN), TLS (NATS_CA,
// NATS_CERT/NATS_KEY, NATS_TLS_HANDSHAKE_FIRST) and inbox prefix that
// every jetfn command reads from the environment. A service fills s from
// the same variables (the struct's env tags), so its publisher needs no
// settings of its own. Settings that fail s.Validate fail Connect.
func WithSettings(s natsconn.Settings) Option {
	return func(c *connectConfig) error {
		if err := s.Validate(); err != nil {
			return err
		}
		opts, err := s.Options()
		if err != nil {
			return err
		}
		c.nats = append(c.nats, opts...)
		return nil
	}
}
