// Command opscheck is the long run of the operations-and-faults checker
// (package test/opscheck): one or more seeded runs, each a fresh system,
// and a tally of what broke.
//
//	go run ./test/opscheck/cmd/opscheck -runs 10 -duration 3m -instances 3
//	go run ./test/opscheck/cmd/opscheck -seed 42 -duration 45s   # replays seed 42
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jetfn/jetfn/test/opscheck"
)

func main() {
	os.Exit(run())
}

type config struct {
	seed    uint64
	runs    int
	opts    opscheck.Options
	dir     string
	history bool
	plan    bool
	shrink  int
	target  string
}

func parse() (config, error) {
	fs := flag.NewFlagSet("opscheck", flag.ContinueOnError)
	var c config
	seed := fs.Uint64("seed", 0, "seed of the first run (0: derived from the clock); run i uses seed+i")
	fs.IntVar(&c.runs, "runs", 1, "how many runs, each with its own seed and a fresh system")
	fs.DurationVar(&c.opts.Duration, "duration", 3*time.Minute, "publishes and faults per run")
	fs.IntVar(&c.opts.Instances, "instances", 3, "jetfn instances")
	fs.IntVar(&c.opts.Nodes, "nodes", 1, "nats-server processes: 1, or 3 for a cluster with R3 streams")
	fs.DurationVar(&c.opts.Settle, "settle", 90*time.Second, "bound on the time to settle after the faults")
	prune := fs.String("prune", "", "true or false: run the instances with or without --prune (default: the seed decides)")
	weights := fs.String("weights", "", "nemesis weights, e.g. deploy=5,partition-remote=2 (others keep their default; 0 disables)")
	fs.DurationVar(&c.opts.Window, "window", 0, "duplicate window of the input and output streams (default: the smallest `jetfn check` accepts; shorter runs with --allow-short-window)")
	keep := fs.String("keep", "", "comma-separated nemesis operations to run, from a shrunk failure's replay line (default: all)")
	fs.StringVar(&c.target, "shrink-for", "", "the kind of violation the shrinker keeps, as the report names it (default: the run's first)")
	fs.IntVar(&c.shrink, "shrink", 0, "on a failure, up to this many more runs looking for a shorter nemesis that still fails")
	ignore := fs.String("ignore", "", "comma-separated kinds of violation to leave out of the verdict")
	fs.StringVar(&c.opts.RecordingKeying, "recording-keying", "", `replaces publish-recording-event's "ordered: true" (a control: "keyConcurrency: 4" must fail the order check)`)
	fs.StringVar(&c.dir, "dir", "", "keep stores, revisions and logs here (default: a temp dir, removed)")
	fs.BoolVar(&c.history, "history", false, "print the whole history of a failed run")
	fs.BoolVar(&c.plan, "plan", false, "print each seed's nemesis operations and run nothing")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return c, err
	}
	c.seed = *seed
	if *ignore != "" {
		c.opts.Ignore = strings.Split(*ignore, ",")
	}
	if *keep != "" {
		c.opts.Keep = []int{}
		for _, k := range strings.Split(*keep, ",") {
			n, err := strconv.Atoi(k)
			if err != nil {
				return c, fmt.Errorf("-keep: %w", err)
			}
			c.opts.Keep = append(c.opts.Keep, n)
		}
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	if *prune != "" {
		p, err := strconv.ParseBool(*prune)
		if err != nil {
			return c, fmt.Errorf("-prune: %w", err)
		}
		c.opts.Prune = &p
	}
	w, err := opscheck.ParseWeights(*weights)
	c.opts.Weights = w
	return c, err
}

func run() int {
	c, err := parse()
	if err != nil {
		fmt.Fprintln(os.Stderr, "opscheck:", err)
		return 2
	}
	if c.plan {
		printPlans(c)
		return 0
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.MkdirTemp(c.dir, "opscheck-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "opscheck:", err)
		return 2
	}
	if c.dir == "" {
		defer os.RemoveAll(root)
	}
	bins, err := opscheck.Build(ctx, root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "opscheck:", err)
		return 2
	}
	c.opts.Bins, c.opts.Log = bins, log
	return runAll(ctx, c, root)
}

// runAll runs every seed and prints a tally: per kind of violation, the
// seeds that showed it.
func runAll(ctx context.Context, c config, root string) int {
	tally, suspects := map[string][]uint64{}, map[string][]uint64{}
	failed := 0
	for i := range c.runs {
		opts := c.opts
		opts.Seed = c.seed + uint64(i)
		opts.Dir = fmt.Sprintf("%s/run-%d", root, opts.Seed)
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "opscheck:", err)
			return 2
		}
		res, err := opscheck.Run(ctx, opts)
		if err != nil {
			fmt.Fprintf(os.Stderr, "opscheck: seed %d: %v\n", opts.Seed, err)
			return 2
		}
		if res.OK() {
			fmt.Println(res.Summary())
			continue
		}
		failed++
		res.Report(os.Stdout)
		if c.history {
			res.History.Write(os.Stdout, res.History.Events())
		}
		if c.shrink > 0 {
			shrunk, err := opscheck.Shrink(ctx, opts, res, c.target, c.shrink)
			if err != nil {
				fmt.Fprintf(os.Stderr, "opscheck: shrinking seed %d: %v\n", opts.Seed, err)
			} else {
				fmt.Printf("\nshrunk from %d to %d nemesis operations:\n", len(res.Schedule.Nemesis()), len(shrunk.Schedule.Nemesis()))
				shrunk.Report(os.Stdout)
			}
		}
		for _, k := range res.Kinds() {
			tally[k] = append(tally[k], opts.Seed)
		}
		for k := range res.Suspects() {
			suspects[k] = append(suspects[k], opts.Seed)
		}
	}
	fmt.Printf("\n%d of %d runs failed (%s each)\n", failed, c.runs, c.opts.Duration)
	printTally("violations", tally, c.runs)
	printTally("suspects", suspects, c.runs)
	if failed > 0 {
		return 1
	}
	return 0
}

// printTally prints, per key, in how many of the runs it showed and with
// which seeds.
func printTally(title string, t map[string][]uint64, runs int) {
	fmt.Println(title + ":")
	for _, k := range slices.Sorted(maps.Keys(t)) {
		fmt.Printf("  %d of %d runs: %s (seeds %v)\n", len(t[k]), runs, k, t[k])
	}
}

// printPlans prints the nemesis operations each seed would run.
func printPlans(c config) {
	for i := range c.runs {
		s := opscheck.Generate(c.seed+uint64(i), c.opts.Duration, c.opts.Instances, c.opts.Nodes, c.opts.Weights)
		fmt.Printf("seed %d (prune %v):\n", s.Seed, s.Prune)
		for _, op := range s.Ops {
			if op.Kind != opscheck.KPublish {
				fmt.Printf("  %4d %8s %-26s %s\n", op.Index, op.At, op.Kind, op.Describe())
			}
		}
	}
}
