package bench

// Issue 34's second curve: messages in flight. One function whose handler
// outlives its ack wait holds N messages at once; over a window the
// parent counts the InProgress acknowledgements the server receives for
// them, the redeliveries, and the child's CPU and resident memory, read
// from /proc while it runs. There is no nats.go baseline: a Consume loop
// keeps nothing alive by itself.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
)

const variantHeld = "jetfn-held"

// The held function's consumer: a message outlives its ack wait 2s unless
// the heartbeat, every second, keeps it.
const (
	heldAckWait   = 2 * time.Second
	heldHeartbeat = time.Second
)

// HeldRow is one count of messages held at once.
type HeldRow struct {
	Held int
	// Window is how long they were held while measured; InProgress how
	// many InProgress acknowledgements the server received meanwhile
	// (Held × Window / heartbeat is one per message per period).
	Window     time.Duration
	InProgress uint64
	// Redelivered is the consumer's redeliveries over the whole run.
	Redelivered uint64
	// CPU is the child's user and system time over the window; RSSKB its
	// resident memory at its end.
	CPU   time.Duration
	RSSKB int64
	// HeapKB and StackKB split the child's memory at the window's end into
	// the live Go heap (what jetfn and nats.go keep per message) and the
	// goroutine stacks (the handlers holding the messages); Goroutines is
	// how many ran.
	HeapKB, StackKB uint64
	Goroutines      int
}

// PerMessagePerPeriod is the InProgress acknowledgements per held message
// per heartbeat period: 1 is exactly what is due.
func (r HeldRow) PerMessagePerPeriod() float64 {
	return float64(r.InProgress) / float64(r.Held) / (r.Window.Seconds() / heldHeartbeat.Seconds())
}

// CPUPerMessageSecond is the child's CPU time per held message per second
// held: flat means the keeper's cost per message does not grow.
func (r HeldRow) CPUPerMessageSecond() time.Duration {
	return time.Duration(float64(r.CPU) / float64(r.Held) / r.Window.Seconds())
}

func (r HeldRow) String() string {
	return fmt.Sprintf("%6d held for %3.0fs: %8d InProgress (%.3f per message per heartbeat), %d redelivered, CPU %6.2f µs per message-second, RSS %.1f MiB (heap %.1f, stacks %.1f, %d goroutines)",
		r.Held, r.Window.Seconds(), r.InProgress, r.PerMessagePerPeriod(), r.Redelivered,
		float64(r.CPUPerMessageSecond())/float64(time.Microsecond), float64(r.RSSKB)/1024,
		float64(r.HeapKB)/1024, float64(r.StackKB)/1024, r.Goroutines)
}

// HeldCostPerMessage is what one more held message costs, in KiB, between
// the smallest and the largest count measured: resident memory, live heap
// and goroutine stacks. The fixed costs of the process cancel out.
type HeldCostPerMessage struct{ RSS, Heap, Stack float64 }

// PerHeldMessage compares the first and the last row (ok is false with
// fewer than two counts).
func PerHeldMessage(rows []HeldRow) (c HeldCostPerMessage, ok bool) {
	if len(rows) < 2 {
		return c, false
	}
	a, b := rows[0], rows[len(rows)-1]
	n := float64(b.Held - a.Held)
	return HeldCostPerMessage{
		RSS:   float64(b.RSSKB-a.RSSKB) / n,
		Heap:  (float64(b.HeapKB) - float64(a.HeapKB)) / n,
		Stack: (float64(b.StackKB) - float64(a.StackKB)) / n,
	}, true
}

func (c HeldCostPerMessage) String() string {
	return fmt.Sprintf("each held message beyond the first count: %.2f KiB resident, of which %.2f KiB live heap and %.2f KiB goroutine stack", c.RSS, c.Heap, c.Stack)
}

// RunHeld measures each count of messages held at once, each on a fresh
// embedded server.
// With profileDir set, each child writes its CPU and allocation profiles
// there (the allocation profile's inuse_space is the heap the held
// messages keep).
func RunHeld(ctx context.Context, counts []int, window time.Duration, profileDir string, progress func(string)) ([]HeldRow, error) {
	var rows []HeldRow
	for _, n := range counts {
		row, err := runHeldOnce(ctx, n, window, profilePath(profileDir, variantHeld, n))
		if err != nil {
			return rows, fmt.Errorf("%d held: %w", n, err)
		}
		progress(row.String())
		rows = append(rows, row)
	}
	return rows, nil
}

func runHeldOnce(ctx context.Context, n int, window time.Duration, profile string) (HeldRow, error) {
	ns, stop, err := freshServer("held")
	if err != nil {
		return HeldRow{}, err
	}
	defer stop()
	c, err := spawn(ctx, childSpec{Variant: variantHeld, NATSURL: ns.ClientURL(), Concurrency: n, Profile: profile})
	if err != nil {
		return HeldRow{}, err
	}
	defer c.kill()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return HeldRow{}, err
	}
	defer nc.Close()
	var inProgress atomic.Uint64
	sub, err := nc.Subscribe("$JS.ACK.HELD.held.>", func(m *nats.Msg) {
		if strings.HasPrefix(string(m.Data), "+WPI") {
			inProgress.Add(1)
		}
	})
	if err != nil {
		return HeldRow{}, err
	}
	defer sub.Unsubscribe()
	js, err := jetstream.New(nc)
	if err != nil {
		return HeldRow{}, err
	}
	payload := make([]byte, 128)
	for range n {
		if _, err := js.PublishAsync("held.in", payload); err != nil {
			return HeldRow{}, err
		}
	}
	<-js.PublishAsyncComplete()
	cons, err := js.Consumer(ctx, "HELD", "held")
	if err != nil {
		return HeldRow{}, err
	}
	if err := awaitHeld(ctx, cons, n); err != nil {
		return HeldRow{}, err
	}
	pid := c.cmd.Process.Pid
	cpuBefore, before := procCPU(pid), inProgress.Load()
	start := time.Now()
	settle(ctx, window)
	row := HeldRow{Held: n, Window: time.Since(start), InProgress: inProgress.Load() - before,
		CPU: procCPU(pid) - cpuBefore, RSSKB: procRSSKB(pid)}
	info, err := cons.Info(ctx)
	if err != nil {
		return row, err
	}
	row.Redelivered = uint64(info.NumRedelivered)
	if info.NumAckPending != n {
		return row, fmt.Errorf("%d messages held at the end of the window, want %d", info.NumAckPending, n)
	}
	rep, err := c.stop()
	if err != nil {
		return row, err
	}
	row.HeapKB, row.StackKB, row.Goroutines = rep.HeapInuseKB, rep.StackInuseKB, rep.Goroutines
	return row, nil
}

// awaitHeld waits until the consumer has all n messages out.
func awaitHeld(ctx context.Context, cons jetstream.Consumer, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		info, err := cons.Info(ctx)
		if err == nil && info.NumAckPending == n {
			return nil
		}
		settle(ctx, 200*time.Millisecond)
	}
	return errors.New("the messages were not all held within two minutes")
}

// procCPU is process pid's user and system time, from /proc (0 where
// there is none).
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: utime and stime
	// are the 12th and 13th, in clock ticks (USER_HZ, 100 on Linux).
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// procRSSKB is process pid's resident memory now (VmRSS), or -1.
func procRSSKB(pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb
			}
		}
	}
	return -1
}

// startHeldRuntime runs one function that holds every message until the
// child stops, with spec.Concurrency workers.
func startHeldRuntime(ctx context.Context, nc *nats.Conn, spec childSpec) (func() error, error) {
	m, err := manifest.Parse(fmt.Appendf(nil, `streams:
  - {name: HELD, subjects: ["held.>"]}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: held, version: 1.0.0, stream: HELD, subject: held.in, ackWait: %s, heartbeat: %s, timeout: 1h,
     concurrency: %d, maxAckPending: %d, prefetch: 0}
`, heldAckWait, heldHeartbeat, spec.Concurrency, spec.Concurrency))
	if err != nil {
		return nil, err
	}
	hold := func(jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(ctx context.Context, _ jetfn.Msg) error {
			<-ctx.Done()
			return ctx.Err()
		}), nil
	}
	return startRuntime(ctx, nc, m, []jetfn.Function{{Name: "held", New: hold}})
}
