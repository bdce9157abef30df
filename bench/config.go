package bench

import (
	"errors"
	"fmt"
	"time"
)

// Config is one benchmark run: which cases, how often, how much load.
type Config struct {
	// Repetitions per variant and case; rows are medians over them.
	Repetitions int
	// Concurrencies are the worker counts of the no-op cases.
	Concurrencies []int
	// Sizes are the no-op payload sizes in bytes.
	Sizes []int
	// Messages returns how many messages one no-op repetition sends at a
	// concurrency; low concurrency is slower, so it gets fewer.
	Messages func(concurrency int) int
	// Window is how many messages per worker may be published and not yet
	// acked: the publisher is a closed loop, so a backlog never builds and
	// latency stays publish-to-ack, not queue length.
	Window int
	// Sessions are the concurrent-session counts of the e2e cases; none
	// skips e2e (and FerretDB).
	Sessions []int
	// SessionsPerRep returns how many sessions one e2e repetition ends.
	SessionsPerRep func(concurrent int) int
	// SegmentsPerSession is how many segments each session has in Mongo.
	SegmentsPerSession int
	// Quiet is summarize-session's quiet period; 0 (the default) counts
	// twice back to back, so the late-segment wait does not dominate.
	Quiet time.Duration
	// ProfileDir, when set, receives a CPU and an allocation profile from
	// every child.
	ProfileDir string
	// RepTimeout bounds one repetition, so a stuck consumer fails the run
	// instead of hanging it.
	RepTimeout time.Duration
	// Progress, when set, is told about each repetition as it ends.
	Progress func(line string)
}

// DefaultConfig is the documented run: the full grid, sized to finish in
// well under ten minutes on two cores.
func DefaultConfig() Config {
	return Config{
		Repetitions:   5,
		Concurrencies: []int{1, 16, 64},
		Sizes:         []int{128, 4096},
		Messages: func(c int) int {
			if c == 1 {
				return 4000
			}
			return 20000
		},
		Window:             2,
		Sessions:           []int{1, 8, 32},
		SessionsPerRep:     func(int) int { return 48 },
		SegmentsPerSession: 6,
		Quiet:              0,
		RepTimeout:         2 * time.Minute,
	}
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if c.Repetitions < 1 {
		errs = append(errs, fmt.Errorf("repetitions: %d is below 1", c.Repetitions))
	}
	if len(c.Concurrencies) == 0 && len(c.Sessions) == 0 {
		errs = append(errs, errors.New("concurrencies and sessions: nothing to run"))
	}
	if len(c.Concurrencies) > 0 && (len(c.Sizes) == 0 || c.Messages == nil) {
		errs = append(errs, errors.New("sizes and messages: required for the no-op cases"))
	}
	if len(c.Sessions) > 0 && (c.SessionsPerRep == nil || c.SegmentsPerSession < 1) {
		errs = append(errs, errors.New("sessionsPerRep and segmentsPerSession: required for the e2e cases"))
	}
	if c.Window < 1 {
		errs = append(errs, fmt.Errorf("window: %d is below 1", c.Window))
	}
	if c.Quiet < 0 {
		errs = append(errs, fmt.Errorf("quiet: %s is negative", c.Quiet))
	}
	if c.RepTimeout <= 0 {
		errs = append(errs, fmt.Errorf("repTimeout: %s is not positive", c.RepTimeout))
	}
	return errors.Join(errs...)
}
