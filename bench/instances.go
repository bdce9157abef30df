package bench

// Issue 34's fourth curve: instances sharing one consumer. N messages are
// stored and the durable is made paused; k processes start the same no-op
// function on it, and once all are ready the parent resumes the consumer
// and times the drain from the first acknowledgement to the last. Each
// child counts what its handler ran, so the shares show, and the sum says
// whether any message ran twice.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// handledHere counts the runs of the backlog function in this child
// process (the shared variant reports it).
var handledHere atomic.Uint64

const variantShared = "jetfn-shared"

// InstancesRow is one drain of a stored backlog by k instances.
type InstancesRow struct {
	Instances, Messages int
	Took                time.Duration
	// Handled is what each instance's handler ran; their sum exceeds
	// Messages by the messages run twice.
	Handled []uint64
}

// Rate is the aggregate messages per second.
func (r InstancesRow) Rate() float64 { return float64(r.Messages) / r.Took.Seconds() }

// RunTwice is how many runs beyond one per message the instances made.
func (r InstancesRow) RunTwice() int64 {
	var sum uint64
	for _, n := range r.Handled {
		sum += n
	}
	return int64(sum) - int64(r.Messages)
}

func (r InstancesRow) String() string {
	shares := make([]string, len(r.Handled))
	for i, n := range r.Handled {
		shares[i] = fmt.Sprintf("%.0f%%", 100*float64(n)/float64(r.Messages))
	}
	return fmt.Sprintf("%d instances, %d stored: %.0f msgs/s together, shares [%s], %d run twice",
		r.Instances, r.Messages, r.Rate(), strings.Join(shares, " "), r.RunTwice())
}

// RunInstances drains n stored messages with each count of instances.
func RunInstances(ctx context.Context, counts []int, n int, progress func(string)) ([]InstancesRow, error) {
	var rows []InstancesRow
	for _, k := range counts {
		row, err := runInstancesOnce(ctx, k, n)
		if err != nil {
			return rows, fmt.Errorf("%d instances: %w", k, err)
		}
		progress(row.String())
		rows = append(rows, row)
	}
	return rows, nil
}

func runInstancesOnce(ctx context.Context, k, n int) (InstancesRow, error) {
	ns, nc, stop, err := serverWithBacklog(ctx, "instances", n)
	if err != nil {
		return InstancesRow{}, err
	}
	defer stop()
	js, err := jetstream.New(nc)
	if err != nil {
		return InstancesRow{}, err
	}
	// Paused until every instance is ready, so none drains alone first;
	// the runtime keeps a consumer's pause through its update.
	if _, err := js.CreateConsumer(ctx, "BACKLOG", jetstream.ConsumerConfig{Durable: "backlog", FilterSubject: "backlog.in",
		AckPolicy: jetstream.AckExplicitPolicy, PauseUntil: ptr(time.Now().Add(time.Hour))}); err != nil {
		return InstancesRow{}, err
	}
	var acked atomic.Int64
	last := make(chan time.Time, 1)
	first := make(chan time.Time, 1)
	sub, err := nc.Subscribe("$JS.ACK.BACKLOG.backlog.>", func(*nats.Msg) {
		switch acked.Add(1) {
		case 1:
			first <- time.Now()
		case int64(n):
			last <- time.Now()
		}
	})
	if err != nil {
		return InstancesRow{}, err
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return InstancesRow{}, err
	}
	children := make([]*child, 0, k)
	defer func() {
		for _, c := range children {
			c.kill()
		}
	}()
	for range k {
		c, err := spawn(ctx, childSpec{Variant: variantShared, NATSURL: ns.ClientURL(), Concurrency: 16})
		if err != nil {
			return InstancesRow{}, err
		}
		children = append(children, c)
	}
	s, err := js.Stream(ctx, "BACKLOG")
	if err != nil {
		return InstancesRow{}, err
	}
	if _, err := s.ResumeConsumer(ctx, "backlog"); err != nil {
		return InstancesRow{}, err
	}
	row := InstancesRow{Instances: k, Messages: n}
	var start, end time.Time
	for _, ch := range []chan time.Time{first, last} {
		select {
		case at := <-ch:
			if start.IsZero() {
				start = at
			} else {
				end = at
			}
		case <-time.After(30 * time.Minute):
			return row, fmt.Errorf("%d of %d acknowledged in 30 minutes", acked.Load(), n)
		case <-ctx.Done():
			return row, ctx.Err()
		}
	}
	row.Took = end.Sub(start)
	// Runs already acknowledged twice would have shown as more
	// acknowledgements than messages by now: give them a moment.
	settle(ctx, time.Second)
	for _, c := range children {
		rep, err := c.stop()
		if err != nil {
			return row, err
		}
		row.Handled = append(row.Handled, rep.Handled)
	}
	children = nil
	return row, nil
}

func ptr[T any](v T) *T { return &v }
