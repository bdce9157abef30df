// Command jetfn-bench measures what the jetfn runtime costs over raw
// JetStream (see package bench) and prints one table. With -doc and -chart
// it also refreshes docs/benchmarks.md and its chart from the same data.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jetfn/jetfn/bench"
)

func main() {
	bench.RunIfChild() // a repetition's consumer never reaches the flags
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jetfn-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := bench.DefaultConfig()
	scale := flag.Float64("scale", 1, "multiply every message and session count (0.1 for a quick look)")
	flag.IntVar(&cfg.Repetitions, "reps", cfg.Repetitions, "repetitions per variant and case")
	flag.BoolVar(&cfg.AgainstItself, "against-itself", false,
		"run each case's baseline on both sides of every pair (an A/A run: what this machine's noise alone does to the figures and goals); "+
			"not with -doc, -chart or the trace and slow workloads, and -workloads defaults to "+againstItselfWorkloads)
	flag.IntVar(&cfg.Window, "window", cfg.Window, "no-op messages in flight per worker (closed-loop publisher)")
	flag.DurationVar(&cfg.Quiet, "quiet", cfg.Quiet, "summarize-session quiet period (0 counts twice back to back)")
	flag.StringVar(&cfg.ProfileDir, "profile", "", "write CPU and allocation profiles of every child to this directory")
	workloads := flag.String("workloads", "noop,budget,rate,drain,e2e,trace",
		"which workloads to run, comma-separated: noop (no-op function, raw's default 500 buffer vs jetfn's derived prefetch), "+
			"budget (no-op with the same in-flight budget on both sides), rate (no-op under an open-loop publisher), "+
			"drain (no-op on a backlog of -drain-messages stored before the consumer starts, c=1 and c=16), "+
			"slow (a 100 ms handler on a 1,000-message backlog with a 2 s ack wait; takes about -slow-limit), e2e (summarize-session), "+
			"trace (jetfn's no-op at 128 B c=16 with OpenTelemetry tracing off vs on, exporting every span to a local OTLP/HTTP sink)")
	budgetP := flag.Int("budget-prefetch", 0, "jetfn's prefetch P in the budget cases, raw gets PullMaxMessages(c+P) (default: P = c)")
	flag.Float64Var(&cfg.Rate, "rate", cfg.Rate, "publish rate of the rate case, msgs/s")
	flag.IntVar(&cfg.RateConcurrency, "rate-concurrency", cfg.RateConcurrency, "workers in the rate case")
	flag.IntVar(&cfg.RateMessages, "rate-messages", cfg.RateMessages, "messages per repetition of the rate case")
	flag.IntVar(&cfg.DrainMessages, "drain-messages", cfg.DrainMessages, "backlog of each drain case, 128 B messages (scaled by -scale)")
	slowMessages := flag.Int("slow-messages", 1000, "backlog of the slow case")
	flag.DurationVar(&cfg.SlowLimit, "slow-limit", cfg.SlowLimit, "cut-off of the slow case (raw handles duplicates for minutes)")
	flag.Func("concurrency", "no-op worker counts, comma-separated (default 1,16,64)", intList(&cfg.Concurrencies))
	flag.Func("sizes", "no-op payload sizes in bytes, comma-separated (default 128,4096)", intList(&cfg.Sizes))
	flag.Func("sessions", "concurrent sessions of the e2e cases, comma-separated (default 1,8,32)", intList(&cfg.Sessions))
	doc := flag.String("doc", "", "Markdown file whose results section to rewrite (e.g. docs/benchmarks.md)")
	chart := flag.String("chart", "", "PNG chart to write (e.g. docs/benchmarks-throughput.png)")
	flag.Parse()
	if cfg.AgainstItself && (*doc != "" || *chart != "") {
		return errors.New("-against-itself: its table compares the baseline with itself, so it writes no -doc or -chart")
	}
	if cfg.AgainstItself && !flagSet("workloads") {
		*workloads = againstItselfWorkloads
	}
	applyScale(&cfg, *scale)
	if err := selectWorkloads(&cfg, *workloads, *slowMessages); err != nil {
		return err
	}
	if p := *budgetP; p > 0 {
		cfg.BudgetPrefetch = func(int) int { return p }
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return err
		}
	}
	cfg.Progress = func(line string) { fmt.Fprintln(os.Stderr, line) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	report, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return output(report, *doc, *chart)
}

// againstItselfWorkloads are an A/A run's workloads unless -workloads
// names others: the default run's without trace, which compares jetfn with
// itself already.
const againstItselfWorkloads = "noop,budget,rate,drain,e2e"

// flagSet reports whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// selectWorkloads turns off the workloads not named.
func selectWorkloads(cfg *bench.Config, list string, slowMessages int) error {
	on := map[string]bool{}
	for w := range strings.SplitSeq(list, ",") {
		w = strings.TrimSpace(w)
		switch w {
		case bench.WorkloadNoop, bench.WorkloadBudget, bench.WorkloadRate, bench.WorkloadDrain, bench.WorkloadSlow, bench.WorkloadSession,
			bench.WorkloadTrace:
			on[w] = true
		default:
			return fmt.Errorf("-workloads: unknown workload %q", w)
		}
	}
	cfg.Noop, cfg.Budget = on[bench.WorkloadNoop], on[bench.WorkloadBudget]
	if !on[bench.WorkloadRate] {
		cfg.Rate = 0
	}
	if !on[bench.WorkloadDrain] {
		cfg.DrainMessages = 0
	}
	if on[bench.WorkloadSlow] {
		cfg.SlowMessages = slowMessages
	}
	if !on[bench.WorkloadSession] {
		cfg.Sessions = nil
	}
	cfg.Trace = on[bench.WorkloadTrace]
	return nil
}

// intList parses a comma-separated flag into *dst.
func intList(dst *[]int) func(string) error {
	return func(s string) error {
		var out []int
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%q is not a positive integer", f)
			}
			out = append(out, n)
		}
		*dst = out
		return nil
	}
}

// applyScale multiplies the default counts, keeping at least a few hundred
// messages and a few sessions per repetition.
func applyScale(cfg *bench.Config, scale float64) {
	if scale == 1 {
		return
	}
	messages, sessions := cfg.Messages, cfg.SessionsPerRep
	cfg.Messages = func(c int) int { return max(200, int(float64(messages(c))*scale)) }
	cfg.RateMessages = max(200, int(float64(cfg.RateMessages)*scale))
	cfg.DrainMessages = max(200, int(float64(cfg.DrainMessages)*scale))
	cfg.SessionsPerRep = func(c int) int { return max(2*c, int(float64(sessions(c))*scale)) }
}

func output(report *bench.Report, doc, chart string) error {
	if report.Config.AgainstItself {
		fmt.Println("A/A run (-against-itself): both sides of every pair ran the case's baseline; the jetfn columns are its second side.")
	}
	if err := report.WriteTable(os.Stdout); err != nil {
		return err
	}
	fmt.Println()
	if len(report.GoalRows()) > 0 {
		if err := report.WriteGoals(os.Stdout); err != nil {
			return err
		}
		fmt.Println()
	}
	report.WriteTargets(os.Stdout)
	if report.TraceExports > 0 {
		fmt.Printf("\ntrace case: the sink received %d OTLP/HTTP exports\n", report.TraceExports)
	}
	fmt.Printf("\n%s; wall time %s\n", report.Machine, report.Wall.Round(time.Second))
	if chart != "" {
		if err := writeChart(report, chart); err != nil {
			return err
		}
	}
	if doc == "" {
		return nil
	}
	rel := ""
	if chart != "" {
		var err error
		if rel, err = filepath.Rel(filepath.Dir(doc), chart); err != nil {
			return err
		}
	}
	return bench.UpdateDoc(doc, report, rel, strings.Join(append([]string{"jetfn-bench"}, os.Args[1:]...), " "))
}

func writeChart(report *bench.Report, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := report.WriteChart(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
