package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/devstack"
)

// Workload names, as rows show them.
const (
	// WorkloadNoop: the no-op function, raw Consume's default 500 buffer
	// against jetfn's derived prefetch.
	WorkloadNoop = "noop"
	// WorkloadBudget: the no-op function with the same in-flight budget
	// on both sides (Config.Budget).
	WorkloadBudget = "budget"
	// WorkloadRate: the no-op function under an open-loop publisher at a
	// fixed rate (Config.Rate).
	WorkloadRate = "rate"
	// WorkloadSlow: a sleeping handler and a short ack wait, on a backlog
	// (Config.SlowMessages).
	WorkloadSlow = "slow"
	// WorkloadDrain: the no-op function on a backlog stored before the
	// consumer starts, raw's default 500 buffer against jetfn's derived
	// prefetch (Config.DrainMessages).
	WorkloadDrain   = "drain"
	WorkloadSession = "e2e"
)

// caseKey is one cell of the grid.
type caseKey struct {
	workload    string
	concurrency int
	size        int // payload bytes; 0 for sessions and slow
	prefetch    int // the budget cases' prefetch allowance
}

func (c caseKey) slug() string {
	switch c.workload {
	case WorkloadSession, WorkloadSlow:
		return fmt.Sprintf("%s-c%d", c.workload, c.concurrency)
	case WorkloadBudget:
		return fmt.Sprintf("budget-%dB-c%d-p%d", c.size, c.concurrency, c.prefetch)
	}
	return fmt.Sprintf("%s-%dB-c%d", c.workload, c.size, c.concurrency)
}

// variants are the baseline and jetfn for the case's workload, in the
// order each repetition runs them.
func (c caseKey) variants() [2]string {
	switch c.workload {
	case WorkloadSession:
		return [2]string{variantBare, variantSessions}
	case WorkloadBudget:
		return [2]string{variantRawBud, variantJetfnBud}
	case WorkloadTrace:
		return [2]string{variantJetfn, variantTraced}
	}
	return [2]string{variantRaw, variantJetfn}
}

// sides are the variants a case's pairs run, in order: the baseline and
// jetfn, or the baseline twice with AgainstItself.
func (r *runner) sides(c caseKey) [2]string {
	v := c.variants()
	if r.cfg.AgainstItself {
		v[1] = v[0]
	}
	return v
}

// Run measures every case of cfg and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	started := time.Now()
	r := &runner{cfg: cfg, machine: describeMachine()}
	if cfg.Trace {
		sink, err := startTraceSink()
		if err != nil {
			return nil, err
		}
		defer sink.stop()
		r.traceSink = sink
	}
	report := &Report{Machine: r.machine, Repetitions: cfg.Repetitions, Config: cfg}
	defer r.endMongo()
	for _, c := range r.cases() {
		if err := r.mongoFor(ctx, c); err != nil {
			return nil, err
		}
		row, err := r.runCase(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", c.slug(), err)
		}
		report.Rows = append(report.Rows, row)
	}
	report.Wall = time.Since(started)
	if r.traceSink != nil {
		report.TraceExports = r.traceSink.requests.Load()
	}
	return report, nil
}

type runner struct {
	cfg       Config
	machine   Machine
	mongoURI  string
	stopMongo func() // set while FerretDB runs (mongoFor)
	db        *mongo.Database
	traceSink *traceSink // with Config.Trace
}

func (r *runner) cases() []caseKey {
	var cases []caseKey
	grid := func(workload string) {
		for _, size := range r.cfg.Sizes {
			for _, c := range r.cfg.Concurrencies {
				k := caseKey{workload: workload, concurrency: c, size: size}
				if workload == WorkloadBudget {
					k.prefetch = r.cfg.BudgetPrefetch(c)
				}
				cases = append(cases, k)
			}
		}
	}
	if r.cfg.Noop {
		grid(WorkloadNoop)
	}
	if r.cfg.Budget {
		grid(WorkloadBudget)
	}
	if r.cfg.Rate > 0 {
		cases = append(cases, caseKey{workload: WorkloadRate, concurrency: r.cfg.RateConcurrency, size: r.cfg.RateSize})
	}
	if r.cfg.DrainMessages > 0 {
		for _, c := range r.cfg.DrainConcurrencies {
			cases = append(cases, caseKey{workload: WorkloadDrain, concurrency: c, size: r.cfg.DrainSize})
		}
	}
	if r.cfg.SlowMessages > 0 {
		cases = append(cases, caseKey{workload: WorkloadSlow, concurrency: r.cfg.SlowConcurrency})
	}
	for _, c := range r.cfg.Sessions {
		cases = append(cases, caseKey{workload: WorkloadSession, concurrency: c})
	}
	if r.cfg.Trace {
		cases = append(cases, traceCase())
	}
	return cases
}

// runCase alternates the two variants, repetition by repetition, so drift
// on a shared machine hits both.
func (r *runner) runCase(ctx context.Context, c caseKey) (Row, error) {
	if c.workload == WorkloadSlow {
		return r.runSlowCase(ctx, c)
	}
	var samples [2][]sample
	for rep := range r.cfg.Repetitions {
		for _, i := range pairOrder(rep) {
			v := r.sides(c)[i]
			s, err := r.runRep(ctx, c, v, i, rep)
			if err != nil {
				return Row{}, fmt.Errorf("%s repetition %d: %w", r.sideName(v, i), rep+1, err)
			}
			samples[i] = append(samples[i], s)
			r.progressSample(c, r.sideName(v, i), rep, s)
		}
	}
	return newRow(c, samples, r.cfg), nil
}

// pairOrder is which variant runs first in pair rep: the baseline in even
// pairs, jetfn in odd ones (ABBA), so a machine that speeds up or slows
// down during a case favours neither side.
func pairOrder(rep int) [2]int {
	if rep%2 == 1 {
		return [2]int{1, 0}
	}
	return [2]int{0, 1}
}

// runSlowCase runs both variants once and at the same time, each on its
// own server: the handlers sleep, so the two barely compete for CPU, and
// the case takes SlowLimit at most instead of twice that.
func (r *runner) runSlowCase(ctx context.Context, c caseKey) (Row, error) {
	var samples [2][]sample
	var errs [2]error
	var wg sync.WaitGroup
	for i, v := range r.sides(c) {
		wg.Go(func() {
			s, err := r.runRep(ctx, c, v, i, 0)
			samples[i], errs[i] = []sample{s}, err
			if err == nil {
				r.progressSample(c, r.sideName(v, i), 0, s)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return Row{}, err
	}
	return newRow(c, samples, r.cfg), nil
}

// sideName is variant, told apart from the first side's in an A/A run
// ("raw-b"), so progress lines and profiles name the side.
func (r *runner) sideName(variant string, side int) string {
	if r.cfg.AgainstItself && side == 1 {
		return variant + "-b"
	}
	return variant
}

func (r *runner) progressSample(c caseKey, variant string, rep int, s sample) {
	if c.workload == WorkloadDrain {
		r.progress("%-22s %-12s rep %d: %8.0f msgs/s  drained in %6.3f s  %6.1f µs CPU/msg  %5.1f allocs/msg  %4.2f writes/msg  %d redelivered",
			c.slug(), variant, rep+1, s.rate, s.elapsed.Seconds(), float64(s.cpuPerMsg)/1e3, s.allocsPerMsg, s.writesPerMsg, s.redeliveries)
		return
	}
	r.progress("%-22s %-12s rep %d: %8.0f msgs/s  p50 %7.2f ms  p99 %7.2f ms  %6.1f µs CPU/msg  %5.1f allocs/msg  %4.2f writes/msg  %d redelivered",
		c.slug(), variant, rep+1, s.rate, ms(s.p50), ms(s.p99), float64(s.cpuPerMsg)/1e3, s.allocsPerMsg, s.writesPerMsg, s.redeliveries)
}

func (r *runner) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(fmt.Sprintf(format, args...))
	}
}

// runRep runs one variant, on side 0 or 1 of the pair, once on a fresh
// nats-server.
func (r *runner) runRep(ctx context.Context, c caseKey, variant string, side, rep int) (sample, error) {
	timeout := r.cfg.RepTimeout
	if c.workload == WorkloadSlow {
		timeout += r.cfg.SlowLimit
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, stop, err := devstack.StartScratchNATS(r.machine.StoreRoot, "jetfn-bench-nats-")
	if err != nil {
		return sample{}, err
	}
	defer stop()
	if c.workload == WorkloadSession {
		if err := resetSummaries(ctx, r.db); err != nil {
			return sample{}, err
		}
	}
	spec := childSpec{Variant: variant, NATSURL: ns.ClientURL(), MongoURI: r.mongoURI, Database: r.dbName(),
		Concurrency: c.concurrency, Quiet: r.cfg.Quiet, Prefetch: c.prefetch,
		Profile: profilePrefix(r.cfg.ProfileDir, r.sideName(variant, side), c, rep+1)}
	if c.workload == WorkloadSlow {
		spec.Sleep, spec.AckWait = r.cfg.SlowHandler, r.cfg.SlowAckWait
	}
	if variant == variantTraced {
		spec.TraceEndpoint = r.traceSink.url
	}
	if c.workload == WorkloadDrain {
		spec.Backlog = true
		return r.measureDrain(ctx, spec, c.size)
	}
	return r.measureChild(ctx, spec, r.load(c))
}

func (r *runner) measureChild(ctx context.Context, spec childSpec, l load) (sample, error) {
	return measureSpawned(ctx, spec, l.n, func() (loadResult, error) { return runLoad(ctx, spec.NATSURL, l) })
}

// measureSpawned runs a child with spec, drives it with drive and makes a
// sample of the n messages from what drive saw and the child reported.
func measureSpawned(ctx context.Context, spec childSpec, n int, drive func() (loadResult, error)) (sample, error) {
	ch, err := spawn(ctx, spec)
	if err != nil {
		return sample{}, err
	}
	res, err := drive()
	if err != nil {
		ch.kill()
		return sample{}, err
	}
	rep, err := ch.stop()
	if err != nil {
		return sample{}, err
	}
	return newSample(res, rep, n), nil
}

// load is the case's traffic. Sessions run with a window of exactly their
// concurrency: "8 concurrent sessions" means eight in flight at a time.
// The slow case publishes its whole backlog at once (a window of all its
// messages), far faster than the handler takes them.
func (r *runner) load(c caseKey) load {
	switch c.workload {
	case WorkloadSession:
		n := r.cfg.SessionsPerRep(c.concurrency)
		segs := r.cfg.SegmentsPerSession
		return load{wl: sessionWorkload, n: n, warmup: min(c.concurrency, n/10), window: c.concurrency,
			payload: func(i int) []byte { return sessionEnded(i, segs) }}
	case WorkloadRate:
		n := r.cfg.RateMessages
		body := make([]byte, c.size)
		return load{wl: noopWorkload, n: n, warmup: n / 20, rate: r.cfg.Rate,
			payload: func(int) []byte { return body }}
	case WorkloadSlow:
		n := r.cfg.SlowMessages
		body := make([]byte, 128)
		return load{wl: slowWorkload(r.cfg.SlowAckWait), n: n, window: n, limit: r.cfg.SlowLimit,
			payload: func(int) []byte { return body }}
	}
	n := r.cfg.Messages(c.concurrency)
	body := make([]byte, c.size)
	return load{wl: noopWorkload, n: n, warmup: n / 20, window: r.cfg.Window * c.concurrency,
		payload: func(int) []byte { return body }}
}

func (r *runner) dbName() string {
	if r.db == nil {
		return ""
	}
	return r.db.Name()
}

// mongoFor starts FerretDB before the first e2e case and stops it after
// the last: in the parent, beside every case's server, its goroutines
// would weigh on the cases that do not use it.
func (r *runner) mongoFor(ctx context.Context, c caseKey) error {
	switch need := c.workload == WorkloadSession; {
	case need && r.stopMongo == nil:
		stop, err := r.startMongo(ctx)
		if err != nil {
			return err
		}
		r.stopMongo = stop
	case !need:
		r.endMongo()
	}
	return nil
}

// endMongo stops FerretDB if it runs.
func (r *runner) endMongo() {
	if r.stopMongo != nil {
		r.stopMongo()
		r.stopMongo, r.db, r.mongoURI = nil, nil, ""
	}
}

// startMongo starts FerretDB for the e2e cases and seeds the segments of
// the largest repetition once.
func (r *runner) startMongo(ctx context.Context) (stop func(), err error) {
	dir, err := os.MkdirTemp("", "jetfn-bench-mongo-")
	if err != nil {
		return nil, err
	}
	m, err := devstack.StartMongo("127.0.0.1:0", dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	client, err := mongo.Connect(options.Client().ApplyURI(m.URI))
	stop = func() {
		if client != nil {
			_ = client.Disconnect(context.Background())
		}
		m.Stop()
		os.RemoveAll(dir)
	}
	if err != nil {
		stop()
		return nil, err
	}
	r.mongoURI, r.db = m.URI, client.Database("jetfnbench")
	sessions := 0
	for _, c := range r.cfg.Sessions {
		sessions = max(sessions, r.cfg.SessionsPerRep(c))
	}
	if err := seedSegments(ctx, r.db, sessions, r.cfg.SegmentsPerSession); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}
