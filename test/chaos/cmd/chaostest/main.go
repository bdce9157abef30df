// Command chaostest runs the chaos harness's full plan against a 3-node
// nats-server cluster and freshly built `jetfn run` instances, and prints
// the table as docs/production.md shows it, with the recording events'
// table below. It exits 1 if an acknowledged session or recording event
// was lost or duplicated, a recording's notices came out of order, or the
// run did not settle.
//
//	go run ./test/chaos/cmd/chaostest --faults 10 --sync always
//
// --key-concurrency 4 runs publish-recording-event with keyConcurrency: 4
// instead of ordered: true, to see the order check fail.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jetfn/jetfn/test/chaos"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("chaostest", flag.ContinueOnError)
	faults := fs.Int("faults", 10, "faults of each kind")
	syncs := fs.String("sync", "always,default", "comma-separated sync_interval settings, one full run each (default: the server's)")
	every := fs.Duration("every", 200*time.Millisecond, "interval between sessions")
	instances := fs.Int("instances", 2, "jetfn run instances")
	quiet := fs.Duration("quiet", 200*time.Millisecond, "summarize-session's quiet period")
	only := fs.String("only", "", "comma-separated fault kinds (default: all)")
	recordings := fs.Int("recordings", 0, "recordings whose nine events are published (default: 6 per fault)")
	recordingEvery := fs.Duration("recording-every", 600*time.Millisecond, "interval between bursts of a recording's events")
	keyConcurrency := fs.Int("key-concurrency", 0, "run publish-recording-event with keyConcurrency: n instead of ordered: true")
	dir := fs.String("dir", "", "keep stores, configs and logs here (default: a temp dir, removed)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	kinds, err := kindsOf(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaostest:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok := true
	for _, sync := range strings.Split(*syncs, ",") {
		if sync == "default" {
			sync = ""
		}
		plan := chaos.Plan{Kinds: kinds, PerKind: *faults, Every: *every, GiveUp: time.Minute, Settle: 2 * time.Minute,
			Recordings: *recordings, RecordingEvery: *recordingEvery}
		if plan.Recordings == 0 {
			plan.Recordings = 6 * len(kinds) * *faults
		}
		opts := chaos.Options{Sync: sync, Instances: *instances, Quiet: *quiet, KeyConcurrency: *keyConcurrency, Log: log}
		if !runOnce(ctx, *dir, opts, plan) {
			ok = false
		}
	}
	if !ok {
		return 1
	}
	return 0
}

// runOnce is one full run with one sync setting, in its own directory.
func runOnce(ctx context.Context, parent string, opts chaos.Options, plan chaos.Plan) bool {
	name := "sync-" + opts.Sync
	if opts.Sync == "" {
		name = "sync-default"
	}
	dir, err := os.MkdirTemp(parent, "chaos-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaostest:", err)
		return false
	}
	if parent == "" {
		defer os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "chaostest: stores, configs and logs in", dir)
	}
	opts.Dir = dir
	began := time.Now()
	h, err := chaos.New(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaostest:", err)
		return false
	}
	defer h.Close()
	rep, err := h.Run(ctx, plan)
	if rep != nil {
		rep.WriteFaults(os.Stderr)
		rep.WriteMarkdown(os.Stdout)
		fmt.Printf("\n(%s in all)\n\n", time.Since(began).Round(time.Second))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaostest:", err)
		return false
	}
	return rep.OK() && rep.Settled
}

func kindsOf(list string) ([]chaos.Kind, error) {
	if list == "" {
		return chaos.Kinds, nil
	}
	var out []chaos.Kind
	for _, name := range strings.Split(list, ",") {
		k := chaos.Kind(strings.TrimSpace(name))
		if !slices.Contains(chaos.Kinds, k) {
			return nil, fmt.Errorf("no fault kind %q (have %v)", k, chaos.Kinds)
		}
		out = append(out, k)
	}
	return out, nil
}
