// Command crashtest runs the crash-consistency matrix against a freshly
// built `jetfn run` binary and prints the table. It exits 1 if any row
// shows a duplicate or a lost session, a lost or altered dead letter, or if
// the short-window control does not show its second notification.
//
//	go run ./test/crash/cmd/crashtest --runs 10 --quiet 2s
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jetfn/jetfn/test/crash"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("crashtest", flag.ContinueOnError)
	runs := fs.Int("runs", 10, "runs per single-session point and per remote point")
	quiet := fs.Duration("quiet", 2*time.Second, "summarize-session's quiet period (config.quiet)")
	window := fs.Duration("short-window", 5*time.Second, "duplicate window of the long-outage control")
	outage := fs.Duration("outage", 7*time.Second, "how long the child stays down in the long-outage runs")
	batch := fs.Int("batch", 50, "sessions in flight per cycle of the batches")
	cycles := fs.Int("cycles", 10, "kill-and-restart cycles of the random batch")
	serverCycles := fs.Int("server-cycles", 2, "server restarts in the nats-restart and mongo-outage batches")
	natsDown := fs.Duration("nats-down", 3*time.Second, "how long the restarted nats-server stays down")
	mongoDown := fs.Duration("mongo-down", 12*time.Second,
		"how long the Mongo-compatible server stays down; longer than jetfn's 10s server-selection timeout makes handlers fail and Nak")
	careless := fs.Int("careless-sessions", 3, "sessions per run of careless-publisher (0 skips it)")
	exhaustions := fs.Int("max-deliveries-runs", 3, "runs of max-deliveries-all-down (0 skips it)")
	orderedKeys := fs.Int("ordered-keys", 16, "keys per ordered row (0 skips the ordered rows)")
	orderedMessages := fs.Int("ordered-messages", 40, "messages per key in each ordered row")
	orderedKills := fs.Int("ordered-kills", 5, "SIGKILLs of ordered-random-kill (0 skips it)")
	orderedFailures := fs.Int("ordered-failures", 3, "failing deliveries of the failing message of ordered-failing-key (0 skips it)")
	orderedKeying := fs.String("ordered-keying", "", `replaces "ordered: true" in the ordered and routed rows' manifest; `+
		`"keyConcurrency: 4" or "none" (no key) are controls the order checker must fail`)
	routedKills := fs.Int("routed-kills", 5, "SIGKILLs of ordered-routed-random-kill, each while the router copies (0 skips it)")
	scheduledKills := fs.Int("scheduled-kills", 5, "SIGKILLs of scheduled-tick-kill, each in the middle of a tick (0 skips it)")
	debouncedKills := fs.Int("debounced-kills", 5, "SIGKILLs of debounced-random-kill, while bursts are published and while their runs come due (0 skips it)")
	debouncedRounds := fs.Int("debounced-rounds", 4, "rounds of bursts of debounced-random-kill, one burst per ordered key each")
	debouncedMessages := fs.Int("debounced-messages", 5, "messages in each burst of debounced-random-kill")
	rewoundKills := fs.Int("rewound-kills", 5, "SIGKILLs of rewound-replay-kill while it handles everything again after `jetfn rewind` (0 skips it)")
	routedKey := fs.String("routed-key", crash.RoutedByHeader, `where the routed rows' key is: "header" (Order-Key) or "field" (key); `+
		`"subject" keys them by subject token 2, which is not their key: a control the order checker must fail`)
	only := fs.String("only", "", "comma-separated rows to run: none,wait,after-store,after-notify,outage,"+
		"after-notify/nats-restart/window-24h,remote-killed-mid-request,jetfn-killed-while-remote-works,"+
		"careless-publisher,max-deliveries-all-down,random,nats-restart,mongo-outage,"+
		"ordered-random-kill,ordered-instances,ordered-failing-key,ordered-routed-random-kill,ordered-routed-instances,scheduled-tick-kill,debounced-random-kill,rewound-replay-kill")
	markdown := fs.Bool("markdown", false, "also print the table as README-ready markdown rows")
	dir := fs.String("dir", "", "keep data, manifests and child logs here (default: a temp dir, removed)")
	buildFlags := fs.String("build-flags", "", "extra `go build` flags for the child binary, space-separated")
	verbose := fs.Bool("v", false, "log every run")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *routedKey != crash.RoutedByHeader && *routedKey != crash.RoutedByField && *routedKey != crash.RoutedBySubject {
		fmt.Fprintf(os.Stderr, "crashtest: --routed-key %q: want %q, %q or %q\n", *routedKey,
			crash.RoutedByHeader, crash.RoutedByField, crash.RoutedBySubject)
		return 2
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	h, err := crash.New(ctx, crash.Options{Dir: *dir, Quiet: *quiet, Log: log, BuildFlags: strings.Fields(*buildFlags)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		return 1
	}
	defer h.Close()
	rep := crash.RunSuite(ctx, h, crash.SuiteOptions{
		Runs: *runs, ShortWindow: *window, Outage: *outage, CarelessSessions: *careless, ExhaustionRuns: *exhaustions,
		BatchSessions: *batch, BatchCycles: *cycles, ServerCycles: *serverCycles, NATSDown: *natsDown, MongoDown: *mongoDown,
		OrderedKeys: *orderedKeys, OrderedMessages: *orderedMessages, OrderedKills: *orderedKills,
		OrderedFailures: *orderedFailures, OrderedKeying: *orderedKeying, RoutedKills: *routedKills, RoutedKey: *routedKey,
		ScheduledKills: *scheduledKills,
		DebouncedKills: *debouncedKills, DebouncedRounds: *debouncedRounds, DebouncedMessages: *debouncedMessages,
		RewoundKills: *rewoundKills,
		Only:         splitList(*only),
	})
	rep.Write(os.Stdout)
	if *markdown {
		fmt.Println()
		rep.WriteMarkdown(os.Stdout)
	}
	if !rep.OK() {
		if *dir != "" {
			fmt.Fprintln(os.Stderr, "child logs in", *dir)
		}
		return 1
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
