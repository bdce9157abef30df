package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/devstack"
)

// Workload names, as rows show them.
const (
	WorkloadNoop    = "noop"
	WorkloadSession = "e2e"
)

// caseKey is one cell of the grid.
type caseKey struct {
	workload    string
	concurrency int
	size        int // payload bytes; 0 for sessions
}

func (c caseKey) slug() string {
	if c.workload == WorkloadSession {
		return fmt.Sprintf("e2e-c%d", c.concurrency)
	}
	return fmt.Sprintf("noop-%dB-c%d", c.size, c.concurrency)
}

// variants are the baseline and jetfn for the case's workload, in the
// order each repetition runs them.
func (c caseKey) variants() [2]string {
	if c.workload == WorkloadSession {
		return [2]string{variantBare, variantSessions}
	}
	return [2]string{variantRaw, variantJetfn}
}

// Run measures every case of cfg and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	started := time.Now()
	r := &runner{cfg: cfg}
	if len(cfg.Sessions) > 0 {
		stop, err := r.startMongo(ctx)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	report := &Report{Machine: describeMachine(), Repetitions: cfg.Repetitions}
	for _, c := range r.cases() {
		row, err := r.runCase(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", c.slug(), err)
		}
		report.Rows = append(report.Rows, row)
	}
	report.Wall = time.Since(started)
	return report, nil
}

type runner struct {
	cfg      Config
	mongoURI string
	db       *mongo.Database
}

func (r *runner) cases() []caseKey {
	var cases []caseKey
	for _, size := range r.cfg.Sizes {
		for _, c := range r.cfg.Concurrencies {
			cases = append(cases, caseKey{workload: WorkloadNoop, concurrency: c, size: size})
		}
	}
	for _, c := range r.cfg.Sessions {
		cases = append(cases, caseKey{workload: WorkloadSession, concurrency: c})
	}
	return cases
}

// runCase alternates the two variants, repetition by repetition, so drift
// on a shared machine hits both.
func (r *runner) runCase(ctx context.Context, c caseKey) (Row, error) {
	var samples [2][]sample
	for rep := range r.cfg.Repetitions {
		for i, v := range c.variants() {
			s, err := r.runRep(ctx, c, v, rep)
			if err != nil {
				return Row{}, fmt.Errorf("%s repetition %d: %w", v, rep+1, err)
			}
			samples[i] = append(samples[i], s)
			r.progress("%-16s %-10s rep %d: %8.0f msgs/s  p50 %6.2f ms  p99 %6.2f ms  %6.1f µs CPU/msg  %5.1f allocs/msg",
				c.slug(), v, rep+1, s.rate, ms(s.p50), ms(s.p99), float64(s.cpuPerMsg)/1e3, s.allocsPerMsg)
		}
	}
	return newRow(c, samples), nil
}

func (r *runner) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(fmt.Sprintf(format, args...))
	}
}

// runRep runs one variant once on a fresh nats-server.
func (r *runner) runRep(ctx context.Context, c caseKey, variant string, rep int) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RepTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "jetfn-bench-nats-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	ns, err := devstack.StartNATS(devstack.NATSOptions{Port: -1, StoreDir: dir})
	if err != nil {
		return sample{}, err
	}
	defer devstack.StopNATS(ns)
	if c.workload == WorkloadSession {
		if err := resetSummaries(ctx, r.db); err != nil {
			return sample{}, err
		}
	}
	spec := childSpec{Variant: variant, NATSURL: ns.ClientURL(), MongoURI: r.mongoURI, Database: r.dbName(),
		Concurrency: c.concurrency, Quiet: r.cfg.Quiet, Profile: profilePrefix(r.cfg.ProfileDir, variant, c, rep+1)}
	return r.measureChild(ctx, spec, r.load(c))
}

func (r *runner) measureChild(ctx context.Context, spec childSpec, l load) (sample, error) {
	ch, err := spawn(ctx, spec)
	if err != nil {
		return sample{}, err
	}
	res, err := runLoad(ctx, spec.NATSURL, l)
	if err != nil {
		ch.kill()
		return sample{}, err
	}
	rep, err := ch.stop()
	if err != nil {
		return sample{}, err
	}
	return newSample(res, rep, l.n), nil
}

// load is the case's traffic. Sessions run with a window of exactly their
// concurrency: "8 concurrent sessions" means eight in flight at a time.
func (r *runner) load(c caseKey) load {
	if c.workload == WorkloadSession {
		n := r.cfg.SessionsPerRep(c.concurrency)
		segs := r.cfg.SegmentsPerSession
		return load{wl: sessionWorkload, n: n, warmup: min(c.concurrency, n/10), window: c.concurrency,
			payload: func(i int) []byte { return sessionEnded(i, segs) }}
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
