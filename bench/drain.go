package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The backlog-drain case (WorkloadDrain) times how fast a consumer empties
// a stream that is already full, the way a function meets its backlog
// after a restart. Unlike the other no-op cases the parent publishes
// nothing while the child runs:
//
//  1. On the fresh server the parent creates the input stream with the
//     baseline's own config (streamConfig), publishes the whole backlog and
//     waits for every PubAck, which it checks is sequences 1..n.
//  2. It subscribes to $JS.ACK.> and spawns the child, which creates the
//     dead-letter stream and its consumer as in every case and consumes.
//     Both variants keep an existing stream of the same config and its
//     messages: raw's CreateOrUpdateStream updates it to the same config,
//     the runtime's reconcile finds it and updates it in place at most.
//  3. The clock starts when the parent sees the consumer's first ack and
//     stops at the server's own stamp of the last ack (AckFloor.Last),
//     read from the first poll of the consumer info whose ack floor is the
//     last stream sequence n. The rate is the n-1 acks after the first over
//     that span. Starting at the first ack leaves out the process start, the
//     connect and the stream and consumer set-up on both sides; stopping at
//     the server's stamp, not at the poll, keeps the poll interval out of
//     the figure. Both are wall-clock times of this process, which runs the
//     server.
//
// The child's counters run from "ready" (its consumer started) to "stop",
// as in every case, but without the GC before them (see measure).

// drainPoll is how often the parent reads the consumer's ack floor. It
// only decides how soon the parent notices the end, not the figure (see
// above); each poll is one $JS.API.CONSUMER.INFO round trip, about 0.1 ms
// of CPU for client and server together on the 2-core machine, so 10 ms
// costs about 1 % of one core while the child drains.
const drainPoll = 10 * time.Millisecond

// backlogPending bounds the backlog's PubAcks in flight.
const backlogPending = 1024

// measureDrain runs one repetition of the drain case on the server at
// spec.NATSURL.
func (r *runner) measureDrain(ctx context.Context, spec childSpec, size int) (sample, error) {
	n, wl := r.cfg.DrainMessages, spec.workload()
	nc, err := nats.Connect(spec.NATSURL)
	if err != nil {
		return sample{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(backlogPending))
	if err != nil {
		return sample{}, err
	}
	if err := publishBacklog(ctx, js, wl, n, make([]byte, size)); err != nil {
		return sample{}, err
	}
	first, unwatch, err := watchFirstAck(nc, wl)
	if err != nil {
		return sample{}, err
	}
	defer unwatch()
	return measureSpawned(ctx, spec, n, func() (loadResult, error) {
		return timeDrain(ctx, js, wl, uint64(n), first, unwatch)
	})
}

// publishBacklog creates wl's input stream and stores n messages in it,
// returning once every PubAck is in.
func publishBacklog(ctx context.Context, js jetstream.JetStream, wl workload, n int, body []byte) error {
	if _, err := js.CreateStream(ctx, streamConfig(wl.stream, wl.streams[wl.stream])); err != nil {
		return fmt.Errorf("creating stream %s: %w", wl.stream, err)
	}
	return publishInOrder(ctx, n, func(i int) (jetstream.PubAckFuture, error) {
		f, err := js.PublishAsync(wl.subject, body, jetstream.WithStallWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("publishing backlog message %d: %w", i, err)
		}
		return f, nil
	})
}

// watchFirstAck reports on first the time the parent sees wl's consumer's
// first ack. unwatch unsubscribes (it may be called more than once), so
// the server stops copying every ack to the parent once the clock runs.
func watchFirstAck(nc *nats.Conn, wl workload) (first <-chan time.Time, unwatch func(), err error) {
	at := make(chan time.Time, 1)
	sub, err := nc.Subscribe("$JS.ACK.>", func(m *nats.Msg) {
		now := time.Now()
		if _, _, ok := ackedSequence(m.Subject, wl); ok {
			select {
			case at <- now:
			default: // not the first
			}
		}
	})
	if err == nil {
		err = nc.Flush() // the server knows the subscription before the child starts
	}
	if err != nil {
		return nil, nil, fmt.Errorf("watching acks: %w", err)
	}
	return at, func() { _ = sub.Unsubscribe() }, nil
}

// timeDrain waits for the first ack, then polls the consumer every
// drainPoll until its ack floor is last.
func timeDrain(ctx context.Context, js jetstream.JetStream, wl workload, last uint64, first <-chan time.Time, unwatch func()) (loadResult, error) {
	var start time.Time
	select {
	case start = <-first:
	case <-ctx.Done():
		return loadResult{}, fmt.Errorf("waiting for the first ack: %w", ctx.Err())
	}
	unwatch()
	cons, err := js.Consumer(ctx, wl.stream, wl.durable)
	if err != nil {
		return loadResult{}, fmt.Errorf("reading consumer info: %w", err)
	}
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return loadResult{}, fmt.Errorf("reading consumer info: %w", err)
		}
		if info.AckFloor.Stream >= last {
			return drained(info, start, last)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return loadResult{}, fmt.Errorf("ack floor at %d of %d: %w", info.AckFloor.Stream, last, ctx.Err())
		}
	}
}

// drained turns the consumer info that shows the whole backlog acked into
// the repetition's result.
func drained(info *jetstream.ConsumerInfo, start time.Time, last uint64) (loadResult, error) {
	if info.AckFloor.Last == nil {
		return loadResult{}, fmt.Errorf("consumer info without the last ack's time")
	}
	span := info.AckFloor.Last.Sub(start.Round(0)) // Round(0): wall clock, as the server's stamp
	if span <= 0 {
		return loadResult{}, fmt.Errorf("%d messages drained in %s: too few to time", last, span)
	}
	return loadResult{rate: float64(last-1) / span.Seconds(), acked: int(last), elapsed: span,
		redeliveries: int(info.Delivered.Consumer) - int(info.Delivered.Stream)}, nil
}
