// Command scale-bench measures how jetfn's cost grows as a deployment
// grows (issue 34), beside nats.go written by hand where there is such a
// thing: functions per process, idle; messages held at once by slow
// handlers; a long backlog drained; instances sharing one consumer; and
// the server's own ceiling, by the NATS CLI's bench.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/jetfn/jetfn/bench"
)

func main() {
	bench.RunIfChild()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scale-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	counts := flag.String("functions", "1,10,100,500", "numbers of functions per process, comma-separated (empty: skip)")
	idle := flag.Duration("idle", 30*time.Second, "how long each process idles while the server counts its requests")
	profile := flag.String("profile", "", "write the CPU and allocation profiles of each idle and held process's measured window to this directory")
	held := flag.String("held", "100,1000,10000", "numbers of messages held at once by slow handlers, comma-separated (empty: skip)")
	heldWindow := flag.Duration("held-window", 20*time.Second, "how long the held messages are measured")
	backlog := flag.String("backlog", "100000,1000000", "backlogs to drain, messages, comma-separated (empty: skip)")
	instances := flag.String("instances", "1,2,4,8", "numbers of processes sharing one consumer, comma-separated (empty: skip)")
	shared := flag.Int("shared-messages", 200000, "the backlog the instances share, and the one the server's ceiling is measured on")
	ceiling := flag.Bool("ceiling", true, "measure the server's ceiling with `nats bench js consume` beside jetfn")
	chart := flag.String("chart", "", "PNG to draw the measured curves in (e.g. docs/benchmarks-scale.png)")
	flag.Parse()
	functions, err := positiveInts("-functions", *counts)
	if err != nil {
		return err
	}
	heldCounts, err := positiveInts("-held", *held)
	if err != nil {
		return err
	}
	backlogs, err := positiveInts("-backlog", *backlog)
	if err != nil {
		return err
	}
	instanceCounts, err := positiveInts("-instances", *instances)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	report := func(line string) { fmt.Println(line) }
	var r bench.ScaleResults
	if r.Idle, err = bench.RunIdle(ctx, functions, *idle, *profile, report); err != nil {
		return err
	}
	if r.Held, err = bench.RunHeld(ctx, heldCounts, *heldWindow, *profile, report); err != nil {
		return err
	}
	if perMessage, ok := bench.PerHeldMessage(r.Held); ok {
		report(perMessage.String())
	}
	if r.Backlog, err = bench.RunBacklog(ctx, backlogs, report); err != nil {
		return err
	}
	if r.Instances, err = bench.RunInstances(ctx, instanceCounts, *shared, report); err != nil {
		return err
	}
	if *ceiling {
		row, err := bench.RunCeiling(ctx, *shared, report)
		if err != nil {
			return err
		}
		r.Ceiling = &row
	}
	if *chart != "" {
		return writeChart(*chart, r)
	}
	return nil
}

// writeChart draws the curves to path.
func writeChart(path string, r bench.ScaleResults) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := bench.WriteScaleChart(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// positiveInts reads a comma-separated list of positive whole numbers.
func positiveInts(flagName, list string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive whole number", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}
