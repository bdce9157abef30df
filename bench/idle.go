package bench

// The first of issue 34's scale curves: many functions in one process,
// idle. Each function has a stream and a durable consumer of its own; the
// child starts them all, says "ready", and idles while the parent counts
// what the server receives. The baseline is the same number of nats.go
// Consume loops, each on its own stream and durable, as a user would write
// them by hand.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/manifest"
)

// The idle variants.
const (
	variantIdleJetfn = "jetfn-idle" // N no-op functions in one runtime
	variantIdleRaw   = "raw-idle"   // N Consume loops on N durables
)

// IdleRow is one variant with one number of functions, idle.
type IdleRow struct {
	Variant   string
	Functions int
	// Ready is from starting the process to every function taking
	// messages (streams and consumers created on a fresh server).
	Ready time.Duration
	// Idle is how long it idled; Requests how many messages the server
	// received from it meanwhile (pulls, acks, API requests).
	Idle     time.Duration
	Requests uint64
	// CPU is the process's user and system time while idle.
	CPU time.Duration
	// PeakRSSKB is the process's resident-set high-water mark.
	PeakRSSKB int64
}

// PerFunctionPer10s is the server requests each function cost while
// idle, per 10 seconds.
func (r IdleRow) PerFunctionPer10s() float64 {
	return float64(r.Requests) / float64(r.Functions) / r.Idle.Seconds() * 10
}

// CPUPercent is the share of one core the process used while idle.
func (r IdleRow) CPUPercent() float64 { return 100 * r.CPU.Seconds() / r.Idle.Seconds() }

// RunIdle measures both variants for each count of functions, each on a
// fresh embedded server, idling for idle.
// With profileDir set, each child writes its CPU and allocation profiles
// of the idle window there.
func RunIdle(ctx context.Context, counts []int, idle time.Duration, profileDir string, progress func(string)) ([]IdleRow, error) {
	var rows []IdleRow
	for _, n := range counts {
		for _, variant := range []string{variantIdleRaw, variantIdleJetfn} {
			row, err := runIdleOnce(ctx, variant, n, idle, profilePath(profileDir, variant, n))
			if err != nil {
				return rows, fmt.Errorf("%s with %d functions: %w", variant, n, err)
			}
			progress(row.String())
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func runIdleOnce(ctx context.Context, variant string, n int, idle time.Duration, profile string) (IdleRow, error) {
	ns, stop, err := freshServer("idle")
	if err != nil {
		return IdleRow{}, err
	}
	defer stop()
	start := time.Now()
	c, err := spawn(ctx, childSpec{Variant: variant, NATSURL: ns.ClientURL(), Functions: n, Concurrency: 1, Profile: profile})
	if err != nil {
		return IdleRow{}, err
	}
	row := IdleRow{Variant: variant, Functions: n, Ready: time.Since(start)}
	// The last creations' replies may still be on their way: let them
	// land before counting.
	settle(ctx, time.Second)
	before, err := ns.Varz(nil)
	if err != nil {
		c.kill()
		return row, err
	}
	idleStart := time.Now()
	settle(ctx, idle)
	after, err := ns.Varz(nil)
	row.Idle = time.Since(idleStart)
	if err != nil {
		c.kill()
		return row, err
	}
	row.Requests = uint64(after.InMsgs - before.InMsgs)
	rep, err := c.stop()
	if err != nil {
		return row, err
	}
	// The child measured CPU from "ready" to "stop": the settle second and
	// the idle window.
	row.CPU = time.Duration(float64(rep.CPU) * row.Idle.Seconds() / (row.Idle + time.Second).Seconds())
	row.PeakRSSKB = rep.PeakRSSKB
	return row, nil
}

// freshServer starts an embedded nats-server on a store of its own, which
// stop removes with it: every size of every scale curve starts clean.
func freshServer(curve string) (*server.Server, func(), error) {
	return devstack.StartScratchNATS("", "jetfn-bench-"+curve+"-")
}

// profilePath is the path prefix of a scale child's profiles in dir, or ""
// (no profiles) when dir is.
func profilePath(dir, variant string, n int) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%d", variant, n))
}

// settle waits d, or until ctx ends.
func settle(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (r IdleRow) String() string {
	return fmt.Sprintf("%-10s %4d functions: ready in %6.2fs, idle %4.0fs: %6d server requests (%.2f per function per 10 s), CPU %.2f%% of a core, peak RSS %.1f MiB",
		r.Variant, r.Functions, r.Ready.Seconds(), r.Idle.Seconds(), r.Requests, r.PerFunctionPer10s(), r.CPUPercent(), float64(r.PeakRSSKB)/1024)
}

// idleManifest is n no-op functions, each on a stream of its own.
func idleManifest(n int) (*manifest.Manifest, error) {
	var b strings.Builder
	b.WriteString("streams:\n  - {name: DEADLETTER, subjects: [\"deadletter.>\"]}\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: IDLE_%d, subjects: [\"idle.%d.>\"]}\n", i, i)
	}
	b.WriteString("functions:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: noop-%d, version: 1.0.0, stream: IDLE_%d, subject: idle.%d.in}\n", i, i, i)
	}
	return manifest.Parse([]byte(b.String()))
}

// startIdleRuntime runs spec.Functions no-op functions in one runtime.
func startIdleRuntime(ctx context.Context, nc *nats.Conn, spec childSpec) (func() error, error) {
	m, err := idleManifest(spec.Functions)
	if err != nil {
		return nil, err
	}
	noop := func(jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { return nil }), nil
	}
	fns := make([]jetfn.Function, spec.Functions)
	for i := range fns {
		fns[i] = jetfn.Function{Name: fmt.Sprintf("noop-%d", i), New: noop}
	}
	return startRuntime(ctx, nc, m, fns)
}

// startIdleRaw runs spec.Functions Consume loops, each on a stream and
// durable of its own, with nats.go's defaults.
func startIdleRaw(ctx context.Context, nc *nats.Conn, spec childSpec) (func() error, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var stops []jetstream.ConsumeContext
	for i := range spec.Functions {
		s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: fmt.Sprintf("IDLE_%d", i), Subjects: []string{fmt.Sprintf("idle.%d.>", i)}})
		if err != nil {
			return nil, err
		}
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("noop-%d", i),
			FilterSubject: fmt.Sprintf("idle.%d.in", i), AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			return nil, err
		}
		cc, err := c.Consume(func(m jetstream.Msg) { _ = m.Ack() })
		if err != nil {
			return nil, err
		}
		stops = append(stops, cc)
	}
	return func() error {
		<-ctx.Done()
		for _, cc := range stops {
			cc.Stop()
		}
		return nil
	}, nil
}
