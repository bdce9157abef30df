package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// childEnv carries a childSpec to a re-executed process; its presence is
// what makes the process a child.
const childEnv = "JETFN_BENCH_CHILD"

// Variants: the baselines and jetfn, for each workload.
const (
	variantRaw      = "raw"          // no-op, hand-written Consume loop with its default 500 buffer
	variantJetfn    = "jetfn"        // no-op, the runtime with its derived prefetch
	variantRawBud   = "raw-budget"   // no-op, Consume with PullMaxMessages(concurrency+prefetch)
	variantJetfnBud = "jetfn-budget" // no-op, the runtime with an explicit prefetch
	variantBare     = "bare"         // session, hand-written Consume loop
	variantSessions = "jetfn-e2e"    // session, the runtime with summarize-session
)

// childSpec is what a child runs.
type childSpec struct {
	Variant     string        `json:"variant"`
	NATSURL     string        `json:"nats_url"`
	MongoURI    string        `json:"mongo_uri,omitempty"`
	Database    string        `json:"database,omitempty"`
	Concurrency int           `json:"concurrency"`
	Quiet       time.Duration `json:"quiet,omitempty"`
	// Prefetch is the budget variants' prefetch allowance.
	Prefetch int `json:"prefetch,omitempty"`
	// Sleep, when set, makes the no-op handler sleep (the slow workload),
	// and AckWait is then its consumer's ack wait.
	Sleep   time.Duration `json:"sleep,omitempty"`
	AckWait time.Duration `json:"ack_wait,omitempty"`
	// Backlog says the stream holds the whole load before the consumer
	// starts (see drain.go).
	Backlog bool `json:"backlog,omitempty"`
	// Profile, when set, is the path prefix of the child's profiles.
	Profile string `json:"profile,omitempty"`
	// TraceEndpoint is the traced variant's OTLP/HTTP endpoint (trace.go).
	TraceEndpoint string `json:"trace_endpoint,omitempty"`
	// Functions is how many functions the idle variants run (idle.go).
	Functions int `json:"functions,omitempty"`
}

// childReport is the child's own view of its repetition: the Go runtime's
// counters between "ready" and "stop", and the process's peak RSS.
type childReport struct {
	Mallocs    uint64        `json:"mallocs"`
	AllocBytes uint64        `json:"alloc_bytes"`
	CPU        time.Duration `json:"cpu"` // user + system
	PeakRSSKB  int64         `json:"peak_rss_kb"`
	// WriteSyscalls is how many write system calls the process made
	// (syscw of /proc/self/io; 0 where there is none): how many pieces its
	// acks left in, which nats.go's flusher decides (docs/benchmarks.md,
	// "What remains, by profile").
	WriteSyscalls uint64 `json:"write_syscalls"`
	// Handled is how many messages the backlog function ran here
	// (instances.go).
	Handled uint64 `json:"handled,omitempty"`
	// HeapInuseKB and StackInuseKB are the Go heap's and the goroutine
	// stacks' memory in use when the parent said "stop", and Goroutines how
	// many ran: they split the resident memory of messages held at once
	// (held.go) into what jetfn keeps per message and the stacks of the
	// handlers holding them.
	HeapInuseKB  uint64 `json:"heap_inuse_kb"`
	StackInuseKB uint64 `json:"stack_inuse_kb"`
	Goroutines   int    `json:"goroutines"`
}

// RunIfChild runs a repetition's consumer and exits, if this process was
// started as a child; otherwise it returns at once. Call it first thing in
// main (and in TestMain), before flags are parsed.
func RunIfChild() {
	raw, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	var spec childSpec
	err := json.Unmarshal([]byte(raw), &spec)
	if err == nil {
		err = runChild(spec, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "jetfn-bench child %s: %v\n", spec.Variant, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runChild starts the consumer, says "ready", waits for the parent to say
// "stop" (or close stdin) and reports what the load cost.
func runChild(spec childSpec, in io.Reader, out io.Writer) error {
	if spec.Profile != "" {
		// Finer sampling than the 512 KiB default, so a few thousand small
		// messages still show up in the allocation profile.
		goruntime.MemProfileRate = 32 << 10
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc, err := nats.Connect(spec.NATSURL)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer nc.Close()
	wait, err := startVariant(ctx, spec, nc)
	if err != nil {
		return err
	}
	report, err := measure(spec.Profile, !spec.Backlog, in, out)
	cancel()
	if werr := wait(); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(report)
}

// startVariant starts the spec's consumer; it returns once the consumer
// takes messages, and the returned wait blocks until it stopped after ctx
// is done.
func startVariant(ctx context.Context, spec childSpec, nc *nats.Conn) (func() error, error) {
	switch spec.Variant {
	case variantRaw:
		return startRaw(ctx, nc, spec.workload(), spec.Concurrency, spec.work())
	case variantRawBud:
		return startRaw(ctx, nc, spec.workload(), spec.Concurrency, spec.work(), budgetOpts(spec)...)
	case variantJetfn:
		return startNoopRuntime(ctx, nc, spec, nil)
	case variantJetfnBud:
		return startNoopRuntime(ctx, nc, spec, &spec.Prefetch)
	case variantBare:
		return startBare(ctx, nc, spec)
	case variantSessions:
		return startSessionRuntime(ctx, nc, spec)
	case variantTraced:
		return startTracedRuntime(ctx, nc, spec)
	case variantIdleJetfn:
		return startIdleRuntime(ctx, nc, spec)
	case variantIdleRaw:
		return startIdleRaw(ctx, nc, spec)
	case variantHeld:
		return startHeldRuntime(ctx, nc, spec)
	case variantBacklog, variantShared:
		return startBacklogRuntime(ctx, nc, spec)
	}
	return nil, fmt.Errorf("unknown variant %q", spec.Variant)
}

// workload is the no-op workload the spec runs: the slow one when its
// handler sleeps.
func (s childSpec) workload() workload {
	if s.Sleep > 0 {
		return slowWorkload(s.AckWait)
	}
	return noopWorkload
}

func (s childSpec) work() work {
	if s.Sleep > 0 {
		return sleepWork(s.Sleep)
	}
	return noopWork
}

// measure brackets the load: counters and profiles from "ready" to "stop".
// With collect it runs a GC first, so the start-up's garbage is not
// collected on the load's time; a consumer on a backlog (see drain.go) is
// measured without, since it takes messages from its first pull and a GC
// would leave them uncounted for as long as it runs.
func measure(profile string, collect bool, in io.Reader, out io.Writer) (childReport, error) {
	stopCPU, err := startCPUProfile(profile)
	if err != nil {
		return childReport{}, err
	}
	var before, after goruntime.MemStats
	if collect {
		goruntime.GC()
	}
	goruntime.ReadMemStats(&before)
	cpuBefore, writesBefore := cpuTime(), writeSyscalls()
	fmt.Fprintln(out, "ready")
	_, _ = bufio.NewReader(in).ReadString('\n') // "stop", or EOF if the parent died
	cpu, writes := cpuTime()-cpuBefore, writeSyscalls()-writesBefore
	goroutines := goruntime.NumGoroutine()
	goruntime.ReadMemStats(&after)
	var live goruntime.MemStats // the heap without the garbage, after the counters
	goruntime.GC()
	goruntime.ReadMemStats(&live)
	stopCPU()
	if err := writeAllocProfile(profile); err != nil {
		return childReport{}, err
	}
	return childReport{
		Mallocs:       after.Mallocs - before.Mallocs,
		AllocBytes:    after.TotalAlloc - before.TotalAlloc,
		CPU:           cpu,
		PeakRSSKB:     peakRSSKB(),
		WriteSyscalls: writes,
		Handled:       handledHere.Load(),
		HeapInuseKB:   live.HeapInuse >> 10,
		StackInuseKB:  live.StackInuse >> 10,
		Goroutines:    goroutines,
	}, nil
}

func startCPUProfile(prefix string) (stop func(), err error) {
	if prefix == "" {
		return func() {}, nil
	}
	f, err := os.Create(prefix + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func writeAllocProfile(prefix string) error {
	if prefix == "" {
		return nil
	}
	f, err := os.Create(prefix + ".allocs.pprof")
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeSyscalls is the process's write system calls so far (syscw of
// /proc/self/io), or 0 where /proc is missing.
func writeSyscalls() uint64 {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "syscw:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(rest), 10, 64)
			return n
		}
	}
	return 0
}

// peakRSSKB is the process's resident-set high-water mark (VmHWM), or -1
// where /proc is missing.
func peakRSSKB() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb
			}
		}
	}
	return -1
}

// profilePrefix names a child's profiles after its case and repetition.
func profilePrefix(dir, variant string, c caseKey, rep int) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%s-r%d", variant, c.slug(), rep))
}

var errNoReady = errors.New("child exited before it was ready")
