package summarizesession

import (
	"errors"
	"fmt"
	"time"
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

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	// Zero is allowed: two counts back to back, no wait for late segments
	// (benchmarks use it so the wait does not dominate).
	if c.Quiet < 0 {
		errs = append(errs, fmt.Errorf("config.quiet: %s is negative", c.Quiet))
	}
	if c.MaxRounds < 1 {
		errs = append(errs, fmt.Errorf("config.maxRounds: %d is below 1", c.MaxRounds))
	}
	return errors.Join(errs...)
}
