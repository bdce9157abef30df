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
// keeps at most window of them published and not yet acked, or, when rate
// is set, an open loop that publishes on a fixed schedule whatever the
// acks do.
type load struct {
	wl      workload
	n       int
	warmup  int // the first warmup acks count for neither rate nor latency
	window  int
	rate    float64 // messages per second; 0 for the closed loop
	payload func(i int) []byte
	// limit, when set, ends the repetition that long after the first
	// publish even if not every message was acked (the slow workload's
	// raw loop handles duplicates for minutes).
	limit time.Duration
}

// loadResult is what the parent saw of a repetition.
type loadResult struct {
	rate      float64         // acked messages per second after warm-up
	latencies []time.Duration // publish to ack, after warm-up
	acked     int             // messages acked at least once
	elapsed   time.Duration   // first publish to last ack (or to the limit)
	// redeliveries is the server's count: every delivery takes the next
	// consumer sequence, redeliveries included, so the consumer sequence
	// less the stream sequences delivered is how many were redeliveries.
	// It is cumulative, unlike ConsumerInfo.NumRedelivered (those pending
	// now).
	redeliveries int
	// redeliveredAcks are acks of a delivery numbered 2 or more, read from
	// the ack subjects; inProgress are the +WPI the consumer sent.
	redeliveredAcks, inProgress int
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
	publish := publishAll
	if l.rate > 0 {
		publish = publishAtRate
	}
	if err := publish(ctx, js, l, obs); err != nil {
		return loadResult{}, err
	}
	var limit <-chan time.Time
	if l.limit > 0 {
		t := time.NewTimer(l.limit - time.Since(obs.start))
		defer t.Stop()
		limit = t.C
	}
	select {
	case <-obs.done:
	case <-limit:
	case <-ctx.Done():
		return loadResult{}, fmt.Errorf("%d of %d messages acked: %w", obs.acked.Load(), l.n, ctx.Err())
	}
	res := obs.result(l)
	if res.redeliveries, err = redeliveries(ctx, js, l.wl); err != nil {
		return loadResult{}, err
	}
	return res, nil
}

// redeliveries is how many deliveries of the consumer were redeliveries,
// from the server's own sequences (see loadResult).
func redeliveries(ctx context.Context, js jetstream.JetStream, wl workload) (int, error) {
	c, err := js.Consumer(ctx, wl.stream, wl.durable)
	if err != nil {
		return 0, fmt.Errorf("reading consumer info: %w", err)
	}
	d := c.CachedInfo().Delivered
	return int(d.Consumer) - int(d.Stream), nil
}

// ackObserver records when each message's ack passes through the server.
type ackObserver struct {
	nc      *nats.Conn
	start   time.Time
	pubAt   []atomic.Int64 // ns since start, by index
	ackAt   []atomic.Int64
	acked   atomic.Int64
	credits chan struct{} // one per message the window allows; nil for an open loop
	done    chan struct{}
	// redelivered counts acks of redeliveries, inProgress the +WPI seen.
	redelivered, inProgress atomic.Int64
}

func observeAcks(url string, l load) (*ackObserver, error) {
	o := &ackObserver{pubAt: make([]atomic.Int64, l.n), ackAt: make([]atomic.Int64, l.n), done: make(chan struct{})}
	if l.rate == 0 {
		o.credits = make(chan struct{}, l.window)
		for range l.window {
			o.credits <- struct{}{}
		}
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
	if bytes.Equal(m.Data, []byte("+WPI")) {
		o.inProgress.Add(1)
		return
	}
	if len(m.Data) > 0 && !bytes.Equal(m.Data, []byte("+ACK")) {
		return // -NAK, +TERM
	}
	seq, delivered, ok := ackedSequence(m.Subject, l.wl)
	if ok && delivered > 1 {
		o.redelivered.Add(1)
	}
	if !ok || seq < 1 || seq > uint64(l.n) || !o.ackAt[seq-1].CompareAndSwap(0, now) {
		return
	}
	if o.credits != nil {
		o.credits <- struct{}{}
	}
	if o.acked.Add(1) == int64(l.n) {
		close(o.done)
	}
}

// ackedSequence reads the stream sequence and the delivery count from an
// ack subject, in the v1
// ($JS.ACK.<stream>.<consumer>.<delivered>.<sseq>...) or the v2 form
// ($JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>...).
func ackedSequence(subject string, wl workload) (seq, delivered uint64, ok bool) {
	t := strings.Split(subject, ".")
	base := 2
	if len(t) >= 11 {
		base = 4
	}
	if len(t) < base+4 || t[base] != wl.stream || t[base+1] != wl.durable {
		return 0, 0, false
	}
	delivered, err1 := strconv.ParseUint(t[base+2], 10, 64)
	seq, err2 := strconv.ParseUint(t[base+3], 10, 64)
	return seq, delivered, err1 == nil && err2 == nil
}

// publishAll publishes as the window allows and checks that the stream
// numbered the messages in publish order, which the latency lookup needs.
func publishAll(ctx context.Context, js jetstream.JetStream, l load, o *ackObserver) error {
	return publishInOrder(ctx, l.n, func(i int) (jetstream.PubAckFuture, error) {
		select {
		case <-o.credits:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return l.publishStamped(js, o, i)
	})
}

// publishAtRate publishes message i at start + i/rate, never waiting for
// acks (an open loop), so a slow consumer meets a growing queue instead of
// a slower publisher. Each message is stamped right before its publish, as
// in the closed loop; if the publisher falls behind the schedule it sends
// the late messages at once.
func publishAtRate(ctx context.Context, js jetstream.JetStream, l load, o *ackObserver) error {
	interval := time.Duration(float64(time.Second) / l.rate)
	return publishInOrder(ctx, l.n, func(i int) (jetstream.PubAckFuture, error) {
		if wait := time.Duration(i)*interval - time.Since(o.start); wait > 0 {
			if err := sleep(ctx, wait); err != nil {
				return nil, err
			}
		}
		return l.publishStamped(js, o, i)
	})
}

// publishStamped publishes message i, stamping its publish time first.
func (l load) publishStamped(js jetstream.JetStream, o *ackObserver, i int) (jetstream.PubAckFuture, error) {
	o.pubAt[i].Store(time.Since(o.start).Nanoseconds())
	f, err := js.PublishAsync(l.wl.subject, l.payload(i))
	if err != nil {
		return nil, fmt.Errorf("publishing message %d: %w", i, err)
	}
	return f, nil
}

// publishInOrder publishes n messages, each with publish(i), and checks
// that the stream stored them as sequences 1..n in that order.
func publishInOrder(ctx context.Context, n int, publish func(i int) (jetstream.PubAckFuture, error)) error {
	futures := make(chan jetstream.PubAckFuture, n)
	checked := make(chan error, 1)
	go func() { checked <- checkSequences(ctx, futures) }()
	for i := range n {
		f, err := publish(i)
		if err != nil {
			close(futures)
			return err
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

// result turns the timestamps into the rate and the latencies after
// warm-up. Messages never acked (a load ended by its limit) count for
// neither.
func (o *ackObserver) result(l load) loadResult {
	acks := make([]int64, 0, l.n)
	lat := make([]time.Duration, 0, l.n-l.warmup)
	for i := range l.n {
		at := o.ackAt[i].Load()
		if at == 0 {
			continue
		}
		acks = append(acks, at)
		if i >= l.warmup {
			lat = append(lat, time.Duration(at-o.pubAt[i].Load()))
		}
	}
	res := loadResult{latencies: lat, acked: len(acks),
		redeliveredAcks: int(o.redelivered.Load()), inProgress: int(o.inProgress.Load())}
	if len(acks) <= l.warmup {
		return res
	}
	slices.Sort(acks)
	from := int64(0)
	if l.warmup > 0 {
		from = acks[l.warmup-1]
	}
	last := acks[len(acks)-1]
	res.rate = float64(len(acks)-l.warmup) / time.Duration(last-from).Seconds()
	res.elapsed = time.Duration(last)
	return res
}
