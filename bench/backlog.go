package bench

// Issue 34's third curve: a long backlog. N messages are stored before
// the consumer starts; the parent counts the consumer's acknowledgements
// as they pass and notes when each tenth of the backlog is done and the
// child's resident memory then, so a slowdown or a growth late in the
// drain shows.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
)

const variantBacklog = "jetfn-backlog"

// BacklogRow is one drain of a stored backlog.
type BacklogRow struct {
	Messages int
	// Tenths are how long each tenth of the backlog took, from the first
	// acknowledgement; RSSKB the child's resident memory as each ended.
	Tenths []time.Duration
	RSSKB  []int64
}

// Rate is the messages per second of tenth i.
func (r BacklogRow) Rate(i int) float64 {
	return float64(r.Messages) / 10 / r.Tenths[i].Seconds()
}

// LastToFirst is the last tenth's rate over the first's.
func (r BacklogRow) LastToFirst() float64 { return r.Rate(9) / r.Rate(0) }

func (r BacklogRow) String() string {
	var rates, rss []string
	for i := range r.Tenths {
		rates = append(rates, fmt.Sprintf("%.0f", r.Rate(i)))
		rss = append(rss, fmt.Sprintf("%.0f", float64(r.RSSKB[i])/1024))
	}
	return fmt.Sprintf("%8d stored: msgs/s by tenth [%s], last/first %.2f; RSS MiB by tenth [%s]",
		r.Messages, strings.Join(rates, " "), r.LastToFirst(), strings.Join(rss, " "))
}

// RunBacklog drains each backlog size once, on a fresh embedded server.
func RunBacklog(ctx context.Context, sizes []int, progress func(string)) ([]BacklogRow, error) {
	var rows []BacklogRow
	for _, n := range sizes {
		row, err := runBacklogOnce(ctx, n)
		if err != nil {
			return rows, fmt.Errorf("a backlog of %d: %w", n, err)
		}
		progress(row.String())
		rows = append(rows, row)
	}
	return rows, nil
}

func runBacklogOnce(ctx context.Context, n int) (BacklogRow, error) {
	ns, nc, stop, err := serverWithBacklog(ctx, "backlog", n)
	if err != nil {
		return BacklogRow{}, err
	}
	defer stop()
	tenth := n / 10
	done := make(chan time.Time, 11) // the first acknowledgement, then each tenth's last
	var mu sync.Mutex
	acked := 0
	sub, err := nc.Subscribe("$JS.ACK.BACKLOG.backlog.>", func(*nats.Msg) {
		mu.Lock()
		acked++
		if acked == 1 || acked%tenth == 0 && acked/tenth <= 10 {
			done <- time.Now()
		}
		mu.Unlock()
	})
	if err != nil {
		return BacklogRow{}, err
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return BacklogRow{}, err
	}
	c, err := spawn(ctx, childSpec{Variant: variantBacklog, NATSURL: ns.ClientURL(), Concurrency: 16, Backlog: true})
	if err != nil {
		return BacklogRow{}, err
	}
	defer c.kill()
	row := BacklogRow{Messages: n}
	timeout := time.After(30 * time.Minute)
	var start time.Time
	select {
	case start = <-done:
	case <-timeout:
		return row, fmt.Errorf("no acknowledgement in 30 minutes")
	}
	for range 10 {
		select {
		case at := <-done:
			row.Tenths = append(row.Tenths, at.Sub(start))
			row.RSSKB = append(row.RSSKB, procRSSKB(c.cmd.Process.Pid))
			start = at
		case <-timeout:
			return row, fmt.Errorf("%d tenths drained in 30 minutes", len(row.Tenths))
		case <-ctx.Done():
			return row, ctx.Err()
		}
	}
	return row, nil
}

// serverWithBacklog starts a fresh server (freshServer) holding n stored
// messages (storeBacklog) and connects to it; stop closes the connection
// and removes the server.
func serverWithBacklog(ctx context.Context, curve string, n int) (*server.Server, *nats.Conn, func(), error) {
	ns, stopServer, err := freshServer(curve)
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		stopServer()
		return nil, nil, nil, err
	}
	stop := func() {
		nc.Close()
		stopServer()
	}
	if err := storeBacklog(ctx, nc, n); err != nil {
		stop()
		return nil, nil, nil, err
	}
	return ns, nc, stop, nil
}

// storeBacklog stores n 128-byte messages on backlog.in.
func storeBacklog(ctx context.Context, nc *nats.Conn, n int) error {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	if _, err := js.CreateStream(ctx, streamConfig("BACKLOG", []string{"backlog.>"})); err != nil {
		return err
	}
	payload := make([]byte, 128)
	for range n {
		if _, err := js.PublishAsync("backlog.in", payload); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("storing %d messages took over ten minutes", n)
	}
}

// startBacklogRuntime runs one no-op function on the stored backlog.
func startBacklogRuntime(ctx context.Context, nc *nats.Conn, spec childSpec) (func() error, error) {
	m, err := manifest.Parse(fmt.Appendf(nil, `streams:
  - {name: BACKLOG, subjects: ["backlog.>"], duplicates: %s}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - {name: backlog, version: 1.0.0, stream: BACKLOG, subject: backlog.in, concurrency: %d}
`, duplicates, spec.Concurrency))
	if err != nil {
		return nil, err
	}
	noop := func(jetfn.Deps) (jetfn.Handler, error) {
		return jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error {
			handledHere.Add(1)
			return nil
		}), nil
	}
	return startRuntime(ctx, nc, m, []jetfn.Function{{Name: "backlog", New: noop}})
}
