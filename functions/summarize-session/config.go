package summarizesession

import (
	"errors"
	"time"

	"github.com/jetfn/jetfn"
)

// Config is the function's `config:` block in the manifest.
type Config struct {
	// Quiet is how long the function waits between two counts of a
	// session's segments; a segment that reaches Mongo later than this after
	// the previous one is missed.
	Quiet time.Duration `yaml:"quiet"`
	// MaxRounds bounds the waits, so a session whose segments keep coming
	// is still summarized; the handler runs for at most MaxRounds*Quiet
	// before it loads the segments.
	MaxRounds int `yaml:"maxRounds"`
}

// DefaultConfig is what the function uses for keys the manifest leaves out.
func DefaultConfig() Config {
	return Config{Quiet: 2 * time.Second, MaxRounds: 5}
}

// Validate reports every invalid field at once, each naming its key
// (jetfn.InvalidConfig), so a manifest's problem points to its line.
func (c Config) Validate() error {
	var errs []error
	// Zero is allowed: two counts back to back, no wait for late segments
	// (benchmarks use it so the wait does not dominate).
	if c.Quiet < 0 {
		errs = append(errs, jetfn.InvalidConfig("quiet", "%s is negative", c.Quiet))
	}
	if c.MaxRounds < 1 {
		errs = append(errs, jetfn.InvalidConfig("maxRounds", "%d is below 1", c.MaxRounds))
	}
	return errors.Join(errs...)
}

// CheckConfig decodes and validates a config block without touching Mongo
// or NATS, so `jetfn check`, deploy and Apply refuse a bad block before the
// function is bound. It is New's own reading of the block.
func CheckConfig(block jetfn.Config) error {
	_, err := decodeConfig(block)
	return err
}

// decodeConfig is the one reading of the block, shared by New and
// CheckConfig so the two cannot drift: the defaults, then the manifest's
// keys over them, then the rules.
func decodeConfig(block jetfn.Config) (Config, error) {
	cfg := DefaultConfig()
	if err := block.DecodeValid(&cfg); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
