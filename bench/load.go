package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// load is one repetition's traffic: n messages through a closed loop that
// keeps at most window of them published and not yet acked.
type load struct {
	wl      workload
	n       int
	warmup  int // the first warmup acks count for neither rate nor latency
	window  int
	payload func(i int) []byte
}

// loadResult is what the parent saw of a repetition.
type loadResult struct {
	rate      float64         // acked messages per second after warm-up
	latencies []time.Duration // publish to ack, after warm-up
}

// How latency is measured, the same way for every variant: the parent
// takes a monotonic timestamp right before each PublishAsync, and a second
// one when it sees that message's "+ACK" on a subscription to $JS.ACK.>
// (core NATS delivers the consumer's ack to every matching subscriber, the
// stream's consumer and this observer alike). The input stream holds only
// this load's messages, published in order from one connection, so the
// i-th publish is stream sequence i+1, which every ack subject carries.
// The figure therefore includes the publish, the pull, the handler, the
// runtime's settle and the ack's trip back through the server, and it
// needs no code inside either variant.
func runLoad(ctx context.Context, url string, l load) (loadResult, error) {
	obs, err := observeAcks(url, l)
	if err != nil {
		return loadResult{}, err
	}
	defer obs.nc.Close()
	pub, err := nats.Connect(url)
	if err != nil {
		return loadResult{}, err
	}
	defer pub.Close()
	js, err := jetstream.New(pub, jetstream.WithPublishAsyncMaxPending(max(l.window, 256)))
	if err != nil {
		return loadResult{}, err
	}
	obs.start = time.Now()
	if err := publishAll(ctx, js, l, obs); err != nil {
		return loadResult{}, err
	}
	select {
	case <-obs.done:
	case <-ctx.Done():
		return loadResult{}, fmt.Errorf("%d of %d messages acked: %w", obs.acked.Load(), l.n, ctx.Err())
	}
	return obs.result(l), nil
}

// ackObserver records when each message's ack passes through the server.
type ackObserver struct {
	nc      *nats.Conn
	start   time.Time
	pubAt   []atomic.Int64 // ns since start, by index
	ackAt   []atomic.Int64
	acked   atomic.Int64
	credits chan struct{} // one per message the window allows
	done    chan struct{}
}

func observeAcks(url string, l load) (*ackObserver, error) {
	o := &ackObserver{
		pubAt: make([]atomic.Int64, l.n), ackAt: make([]atomic.Int64, l.n),
		credits: make(chan struct{}, l.window), done: make(chan struct{}),
	}
	for range l.window {
		o.credits <- struct{}{}
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	o.nc = nc
	sub, err := nc.Subscribe("$JS.ACK.>", func(m *nats.Msg) { o.saw(m, l) })
	if err == nil {
		err = sub.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = nc.Flush() // the server knows the subscription before any publish
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("watching acks: %w", err)
	}
	return o, nil
}

func (o *ackObserver) saw(m *nats.Msg, l load) {
	now := time.Since(o.start).Nanoseconds()
	if len(m.Data) > 0 && !bytes.Equal(m.Data, []byte("+ACK")) {
		return // +WPI, -NAK, +TERM
	}
	seq, ok := ackedSequence(m.Subject, l.wl)
	if !ok || seq < 1 || seq > uint64(l.n) || !o.ackAt[seq-1].CompareAndSwap(0, now) {
		return
	}
	o.credits <- struct{}{}
	if o.acked.Add(1) == int64(l.n) {
		close(o.done)
	}
}

// ackedSequence reads the stream sequence from an ack subject, in the v1
// ($JS.ACK.<stream>.<consumer>.<delivered>.<sseq>...) or the v2 form
// ($JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>...).
func ackedSequence(subject string, wl workload) (uint64, bool) {
	t := strings.Split(subject, ".")
	base := 2
	if len(t) >= 11 {
		base = 4
	}
	if len(t) < base+4 || t[base] != wl.stream || t[base+1] != wl.durable {
		return 0, false
	}
	seq, err := strconv.ParseUint(t[base+3], 10, 64)
	return seq, err == nil
}

// publishAll publishes as the window allows and checks that the stream
// numbered the messages in publish order, which the latency lookup needs.
func publishAll(ctx context.Context, js jetstream.JetStream, l load, o *ackObserver) error {
	futures := make(chan jetstream.PubAckFuture, l.n)
	checked := make(chan error, 1)
	go func() { checked <- checkSequences(ctx, futures) }()
	for i := range l.n {
		select {
		case <-o.credits:
		case <-ctx.Done():
			close(futures)
			return ctx.Err()
		}
		o.pubAt[i].Store(time.Since(o.start).Nanoseconds())
		f, err := js.PublishAsync(l.wl.subject, l.payload(i))
		if err != nil {
			close(futures)
			return fmt.Errorf("publishing message %d: %w", i, err)
		}
		futures <- f
	}
	close(futures)
	return <-checked
}

func checkSequences(ctx context.Context, futures <-chan jetstream.PubAckFuture) error {
	want := uint64(1)
	for f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Sequence != want {
				return fmt.Errorf("stream stored publish %d as sequence %d", want, ack.Sequence)
			}
		case err := <-f.Err():
			return fmt.Errorf("publish %d: %w", want, err)
		case <-ctx.Done():
			return ctx.Err()
		}
		want++
	}
	return nil
}

// result turns the timestamps into the rate and the latencies after warm-up.
func (o *ackObserver) result(l load) loadResult {
	acks := make([]int64, l.n)
	lat := make([]time.Duration, 0, l.n-l.warmup)
	for i := range l.n {
		acks[i] = o.ackAt[i].Load()
		if i >= l.warmup {
			lat = append(lat, time.Duration(acks[i]-o.pubAt[i].Load()))
		}
	}
	slices.Sort(acks)
	from := int64(0)
	if l.warmup > 0 {
		from = acks[l.warmup-1]
	}
	span := time.Duration(acks[l.n-1] - from)
	return loadResult{rate: float64(l.n-l.warmup) / span.Seconds(), latencies: lat}
}
