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
	// AgainstItself runs each case's baseline on both sides of every pair
	// (an A/A run): nothing differs between the sides, so whatever the
	// goal table shows is this machine's noise, and how often a verdict
	// misses by chance alone.
	AgainstItself bool
	// Noop runs the no-op grid: raw's default buffer against jetfn's
	// derived prefetch.
	Noop bool
	// Concurrencies are the worker counts of the no-op and budget cases.
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
	// Budget runs the no-op grid again with the same in-flight budget on
	// both sides: jetfn with an explicit prefetch BudgetPrefetch(c), raw
	// Consume with PullMaxMessages(c + BudgetPrefetch(c)).
	Budget         bool
	BudgetPrefetch func(concurrency int) int
	// Rate, when above 0, adds the open-loop latency case: RateMessages
	// messages of RateSize bytes published at Rate per second to
	// RateConcurrency workers, raw (500 buffer) against jetfn (derived).
	Rate            float64
	RateConcurrency int
	RateSize        int
	RateMessages    int
	// SlowMessages, when above 0, adds the slow-handler case: a backlog of
	// that many messages to SlowConcurrency workers whose handler sleeps
	// SlowHandler, on a consumer with SlowAckWait, raw (500 buffer) against
	// jetfn (derived). One repetition; both variants run at once (each on
	// its own server: they sleep, so they do not compete for CPU), and the
	// raw one is cut off at SlowLimit.
	SlowMessages    int
	SlowConcurrency int
	SlowHandler     time.Duration
	SlowAckWait     time.Duration
	SlowLimit       time.Duration
	// DrainMessages, when above 0, adds the backlog-drain cases: that many
	// messages of DrainSize bytes are stored before the child starts, then
	// drained by each of DrainConcurrencies workers, raw (500 buffer)
	// against jetfn (derived), timed until the consumer's ack floor is the
	// last stream sequence (see drain.go).
	DrainMessages      int
	DrainConcurrencies []int
	DrainSize          int
	// Trace adds the tracing case (trace.go): jetfn on the no-op function
	// at c=16 with 128 B messages, tracing off against on, exporting every
	// span over OTLP/HTTP to a local sink.
	Trace bool
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
// under ten minutes on two cores. The slow-handler case is off
// (SlowMessages 0): it alone takes SlowLimit; set SlowMessages to 1000 for
// it.
func DefaultConfig() Config {
	return Config{
		Repetitions:   9,
		Noop:          true,
		Concurrencies: []int{1, 16, 64},
		Sizes:         []int{128, 4096},
		Messages: func(c int) int {
			if c == 1 {
				return 4000
			}
			return 20000
		},
		Window:             2,
		Budget:             true,
		BudgetPrefetch:     func(c int) int { return c },
		Rate:               5000,
		RateConcurrency:    16,
		RateSize:           128,
		RateMessages:       50000,
		SlowConcurrency:    1,
		SlowHandler:        100 * time.Millisecond,
		SlowAckWait:        2 * time.Second,
		SlowLimit:          150 * time.Second,
		DrainMessages:      20000,
		DrainConcurrencies: []int{1, 16},
		DrainSize:          128,
		Trace:              true,
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
	grid := (c.Noop || c.Budget) && len(c.Concurrencies) > 0
	if !grid && len(c.Sessions) == 0 && c.Rate <= 0 && c.SlowMessages <= 0 && c.DrainMessages <= 0 && !c.Trace {
		errs = append(errs, errors.New("noop, budget, sessions, rate, slowMessages, drainMessages and trace: nothing to run"))
	}
	if c.Budget && c.BudgetPrefetch == nil {
		errs = append(errs, errors.New("budgetPrefetch: required for the budget cases"))
	}
	if c.Rate > 0 && (c.RateConcurrency < 1 || c.RateSize < 1 || c.RateMessages < 20) {
		errs = append(errs, errors.New("rateConcurrency, rateSize and rateMessages (≥ 20): required for the rate case"))
	}
	if c.SlowMessages > 0 && (c.SlowConcurrency < 1 || c.SlowHandler <= 0 || c.SlowAckWait <= 0 || c.SlowLimit <= 0) {
		errs = append(errs, errors.New("slowConcurrency, slowHandler, slowAckWait and slowLimit: required for the slow case"))
	}
	if c.DrainMessages > 0 && (c.DrainMessages < 2 || len(c.DrainConcurrencies) == 0 || c.DrainSize < 1) {
		errs = append(errs, errors.New("drainMessages (≥ 2), drainConcurrencies and drainSize: required for the drain cases"))
	}
	if grid && (len(c.Sizes) == 0 || c.Messages == nil) {
		errs = append(errs, errors.New("sizes and messages: required for the no-op and budget cases"))
	}
	if c.Trace && c.Messages == nil {
		errs = append(errs, errors.New("messages: required for the trace case"))
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
	if c.AgainstItself && (c.Trace || c.SlowMessages > 0) {
		// The trace case already compares jetfn with itself, and the slow
		// goal judges jetfn's own redeliveries, which raw's are not: an A/A
		// run of either would miss or pass by design, not by noise.
		errs = append(errs, errors.New("againstItself: not with the trace or slow cases (leave trace and slow out of the workloads)"))
	}
	if c.RepTimeout <= 0 {
		errs = append(errs, fmt.Errorf("repTimeout: %s is not positive", c.RepTimeout))
	}
	return errors.Join(errs...)
}
