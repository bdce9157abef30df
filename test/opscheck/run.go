package opscheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Options configure one run.
type Options struct {
	// Dir holds the binaries, the stores, the revisions and the logs.
	Dir string
	// Bins are binaries built by Build; empty builds them into Dir.
	Bins *Binaries
	// Seed decides every operation of the run.
	Seed uint64
	// Duration is how long publishes and faults go on.
	Duration time.Duration
	// Instances is how many `jetfn run --deployment` processes share the
	// functions.
	Instances int
	// Nodes is 1 (one restartable nats-server process) or 3 (test/chaos's
	// cluster, R3 streams).
	Nodes int
	// Settle bounds the time from the end of the faults until every input
	// is handled or dead-lettered.
	Settle time.Duration
	// Weights replace DefaultWeights when set.
	Weights Weights
	// Prune, when set, overrides the seed's choice of --prune.
	Prune *bool
	// Window is the duplicate window of the input and output streams;
	// zero is the smallest that `jetfn check` accepts for every revision
	// (twice the redelivery horizon). A shorter one runs deploy and the
	// instances with --allow-short-window.
	Window time.Duration
	// Keep, when not nil, runs only these nemesis operations of the
	// seed's schedule (a shrunk reproduction).
	Keep []int
	// Ignore lists kinds of violation to leave out of the verdict (a Low
	// item documented instead of fixed, say); they are still counted.
	Ignore []string
	// RecordingKeying replaces the recording function's `ordered: true` in
	// every revision: "keyConcurrency: 4" is the control under which the
	// order check must fail (several events of one recording at once).
	RecordingKeying string
	// Log receives progress.
	Log *slog.Logger
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("opscheck: no directory"))
	}
	if o.Duration < 10*time.Second {
		errs = append(errs, fmt.Errorf("opscheck: duration %s, want at least 10s", o.Duration))
	}
	if o.Instances < 1 {
		errs = append(errs, fmt.Errorf("opscheck: %d instances, want at least 1", o.Instances))
	}
	if o.Nodes != 1 && o.Nodes != 3 {
		errs = append(errs, fmt.Errorf("opscheck: %d nodes, want 1 or 3", o.Nodes))
	}
	if o.Settle <= 0 {
		errs = append(errs, fmt.Errorf("opscheck: settle bound %s is not positive", o.Settle))
	}
	if o.Log == nil {
		errs = append(errs, errors.New("opscheck: no logger"))
	}
	return errors.Join(errs...)
}

// Binaries are jetfn, the pinned nats-server and the remote example.
type Binaries = binaries

// Build compiles the binaries once, for several runs.
func Build(ctx context.Context, dir string) (*Binaries, error) {
	b, err := buildBinaries(ctx, dir)
	return &b, err
}

// Result is what one run found.
type Result struct {
	Schedule    *Schedule
	History     *History
	Violations  []Violation
	Window      time.Duration
	SettleTook  time.Duration
	Inputs      int
	DeadLetters int
	Outputs     int
	// Ordered counts the recording inputs whose order the check compared.
	Ordered int
	Took    time.Duration
	// Ignored counts violations of the kinds Options.Ignore names.
	Ignored int
	// Dir holds the run's stores, revisions and logs.
	Dir string
	// Keying is Options.RecordingKeying.
	Keying string
}

// OK reports whether every promise held.
func (r *Result) OK() bool { return len(r.Violations) == 0 }

// Run executes the schedule of opts.Seed against a fresh system and
// checks the history. The error is the harness's own failure (a server
// that would not start); broken promises are in the Result.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	weights := opts.Weights
	if weights == nil {
		weights = DefaultWeights
	}
	sched := Generate(opts.Seed, opts.Duration, opts.Instances, opts.Nodes, weights)
	if opts.Prune != nil {
		sched.Prune = *opts.Prune
	}
	sched.Keep = opts.Keep
	return RunSchedule(ctx, opts, sched)
}

// RunSchedule runs a given schedule (a shrunk one, say).
func RunSchedule(ctx context.Context, opts Options, sched *Schedule) (*Result, error) {
	began := time.Now()
	bins := opts.Bins
	if bins == nil {
		var err error
		if bins, err = Build(ctx, opts.Dir); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &system{dir: opts.Dir, log: opts.Log, hist: newHistory(), window: minWindow(), replicas: replicasFor(opts.Nodes),
		prune: sched.Prune, book: newLedger(), keying: opts.RecordingKeying}
	if opts.Window > 0 {
		s.window, s.allowShort = opts.Window, opts.Window < s.window
	}
	defer func() {
		cancel()
		s.close()
	}()
	opts.Log.Info("opscheck: starting", "seed", sched.Seed, "duration", sched.Duration, "instances", sched.Instances,
		"nodes", sched.Nodes, "prune", sched.Prune, "window", s.window, "ops", len(sched.Ops), "dir", opts.Dir)
	if err := s.start(ctx, *bins, sched.Instances, sched.Nodes); err != nil {
		return nil, fmt.Errorf("starting the system: %w", err)
	}
	res := &Result{Schedule: sched, History: s.hist, Window: s.window, Keying: opts.RecordingKeying}
	var wg sync.WaitGroup
	defer wg.Wait()
	s.dl = newDLObserver(s.js, s.hist)
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	wg.Go(func() { s.dl.run(obsCtx) })
	s.operate(ctx, sched)
	took, err := s.settle(ctx, opts.Settle)
	res.SettleTook = took
	if err != nil {
		res.Violations = append(res.Violations, Violation{What: VNotSettled, Evidence: []string{err.Error()}})
	}
	s.readInstanceLogs()
	obs, err := s.observe(ctx)
	if err != nil {
		return res, fmt.Errorf("reading the outcome: %w", err)
	}
	for _, v := range check(obs) {
		if slices.Contains(opts.Ignore, v.What) {
			res.Ignored++
			continue
		}
		res.Violations = append(res.Violations, v)
	}
	res.Inputs, res.DeadLetters, res.Outputs, res.Ordered = len(obs.book.order), len(obs.dls), len(obs.outputs), obs.placed
	res.Took = time.Since(began)
	res.Dir = opts.Dir
	return res, nil
}

func replicasFor(nodes int) int {
	if nodes > 1 {
		return 3
	}
	return 1
}

// operate runs the publish lanes and the nemesis until both are done.
func (s *system) operate(ctx context.Context, sched *Schedule) {
	start := time.Now()
	s.hist.Info("operate", fmt.Sprintf("seed %d: %d operations over %s", sched.Seed, len(sched.Ops), sched.Duration))
	pub := &publisher{js: s.js, hist: s.hist, book: s.book}
	perLane := make([][]Op, lanes)
	var nemesis []Op
	for _, op := range sched.Ops {
		switch {
		case op.Kind == KPublish:
			perLane[op.Lane] = append(perLane[op.Lane], op)
		case sched.runs(op.Index):
			nemesis = append(nemesis, op)
		}
	}
	var wg sync.WaitGroup
	for _, ops := range perLane {
		wg.Go(func() { pub.lane(ctx, start, ops) })
	}
	for _, op := range nemesis {
		if !waitUntil(ctx, start.Add(op.At)) {
			break
		}
		s.exec(ctx, op)
	}
	wg.Wait()
}

// observe reads the outcome: every dead letter, output and effect.
func (s *system) observe(ctx context.Context) (*observed, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.dl.sync(ctx); err != nil {
		return nil, err
	}
	outs, err := scanOutputs(ctx, s.js)
	if err != nil {
		return nil, err
	}
	eff, err := scanEffects(ctx, s.mc.Database(database))
	if err != nil {
		return nil, err
	}
	return &observed{book: s.book, dls: s.dl.all(), replays: s.replays.all(), outputs: outs, effects: eff,
		deletions: s.deletions, live: s.live, settleStart: s.settleStart, window: s.window,
		events: s.hist.Events()}, nil
}
