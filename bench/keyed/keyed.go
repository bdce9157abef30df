// Package keyed measures what ordering per key costs: a backlog of
// messages spread over many keys, drained by the same no-op function
// unordered, ordered per key (jetfn's partitions), and by the client-side
// alternatives a nats.go user writes (the same keyed stream, one consumer
// per partition with one message pending, consumed in a goroutine each; or
// the input partitioned as it is stored, with no copy). The last two are
// no design but ceilings: the keyed copy read with many messages pending
// per partition and no order, the most a design that copies can reach;
// and the same for the input partitioned as stored.
// Repetitions alternate the variants, each on a fresh embedded
// nats-server, so drift on a shared machine hits all of them.
package keyed

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
)

// Variants, as the table names them.
const (
	Unordered   = "jetfn-unordered"
	Ordered     = "jetfn-ordered"
	Partitioned = "natsgo-partitioned"
	// Routed is ordered with the key in a header: jetfn's router copies
	// the messages into the keyed stream instead of the server.
	Routed = "jetfn-ordered-header"
	// IngestPartitioned is ordered with no copy: the input stream's own
	// subject transform writes each message's partition into its stored
	// subject, and one consumer per partition reads the input itself, one
	// message pending each. The price is the stored subjects: every reader
	// of the stream sees bench.<partition>.<key>, not what was published.
	IngestPartitioned = "natsgo-ingest-partitioned"
	// CopyCeiling is not ordered: Partitioned's keyed copy read with
	// Concurrency messages pending per partition. No design that copies
	// into a work-queue stream drains faster.
	CopyCeiling = "ceiling-copy-unordered"
	// IngestCeiling is not ordered either: IngestPartitioned's consumers
	// with Concurrency messages pending each, the most partitions read in
	// place can reach.
	IngestCeiling = "ceiling-ingest-unordered"
)

// keyHeader carries every message's key, for the routed variant (the
// others read the subject's, the same key).
const keyHeader = "Bench-Key"

// Config is one comparison: Messages stored over Keys keys, drained with
// Concurrency workers and Partitions partitions (0: as many as workers),
// Repetitions times each.
type Config struct {
	Messages, Keys, Concurrency, Partitions, Repetitions int
	Variants                                             []string
	Progress                                             func(string)
}

// Sample is one drain: how long it took and the process's CPU time (the
// embedded server's included, the same for every variant) per message.
type Sample struct {
	Variant   string
	Elapsed   time.Duration
	CPUPerMsg time.Duration
	// HeapAfter is the process's heap in use right after the drain, the
	// server's included: what many keys leave behind.
	HeapAfter uint64
}

// PartitionCount is how many partitions the partitioned variants use. More
// partitions than workers keep more messages ready when each partition
// has one pending: the question is whether that closes the gap to
// unordered without a window per partition.
func (cfg Config) PartitionCount() int {
	if cfg.Partitions > 0 {
		return cfg.Partitions
	}
	return cfg.Concurrency
}

// Rate is messages per second.
func (s Sample) Rate(n int) float64 { return float64(n) / s.Elapsed.Seconds() }

// Run drains the backlog with every variant, Repetitions times,
// alternating them.
func Run(ctx context.Context, cfg Config) ([]Sample, error) {
	var out []Sample
	for rep := range cfg.Repetitions {
		for i := range cfg.Variants {
			v := cfg.Variants[(i+rep)%len(cfg.Variants)] // rotate who goes first
			s, err := drainOnce(ctx, cfg, v)
			if err != nil {
				return nil, fmt.Errorf("%s repetition %d: %w", v, rep+1, err)
			}
			if cfg.Progress != nil {
				cfg.Progress(fmt.Sprintf("%-26s rep %d: %8.0f msgs/s  %6.1f µs CPU/msg  heap after %5.1f MiB", v, rep+1,
					s.Rate(cfg.Messages), float64(s.CPUPerMsg)/1e3, float64(s.HeapAfter)/(1<<20)))
			}
			out = append(out, s)
		}
	}
	return out, nil
}

const (
	stream  = "BENCH"
	subject = "bench.*"
	durable = "keyed"
)

// drainOnce stores the backlog on a fresh server, then times variant v
// from its start until it handled every message.
func drainOnce(ctx context.Context, cfg Config, v string) (Sample, error) {
	ns, stop, err := devstack.StartScratchNATS("", "jetfn-keyed-bench-")
	if err != nil {
		return Sample{}, err
	}
	defer stop()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return Sample{}, err
	}
	defer nc.Close()
	if err := storeBacklog(ctx, nc, cfg, inputStream(cfg, v)); err != nil {
		return Sample{}, err
	}
	var handled atomic.Int64
	done := make(chan struct{})
	count := func() {
		if handled.Add(1) == int64(cfg.Messages) {
			close(done)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cpu0, start := cpuTime(), time.Now()
	wait, err := startVariant(runCtx, nc, ns, cfg, v, count)
	if err != nil {
		return Sample{}, err
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		return Sample{}, fmt.Errorf("handled %d of %d in 10 minutes", handled.Load(), cfg.Messages)
	case <-ctx.Done():
		return Sample{}, fmt.Errorf("handled %d of %d: %w", handled.Load(), cfg.Messages, ctx.Err())
	}
	s := Sample{Variant: v, Elapsed: time.Since(start), CPUPerMsg: (cpuTime() - cpu0) / time.Duration(cfg.Messages), HeapAfter: heapInUse()}
	cancel()
	wait()
	return s, nil
}

// inputStream is the stream the backlog is stored in for variant v: the
// input, partitioned as it is stored for IngestPartitioned.
func inputStream(cfg Config, v string) jetstream.StreamConfig {
	sc := jetstream.StreamConfig{Name: stream, Subjects: []string{"bench.>"}}
	if v == IngestPartitioned || v == IngestCeiling {
		sc.SubjectTransform = &jetstream.SubjectTransformConfig{Source: subject,
			Destination: fmt.Sprintf("bench.{{partition(%d,1)}}.{{wildcard(1)}}", cfg.PartitionCount())}
	}
	return sc
}

// storeBacklog publishes Messages messages, message i to key i mod Keys,
// into the input stream in.
func storeBacklog(ctx context.Context, nc *nats.Conn, cfg Config, in jetstream.StreamConfig) error {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	for _, s := range []jetstream.StreamConfig{in, {Name: "DEADLETTER", Subjects: []string{"deadletter.>"}}} {
		if _, err := js.CreateStream(ctx, s); err != nil {
			return err
		}
	}
	payload := make([]byte, 128)
	for i := range cfg.Messages {
		key := fmt.Sprintf("k%d", i%cfg.Keys)
		m := nats.NewMsg("bench." + key)
		m.Data = payload
		m.Header.Set(keyHeader, key)
		if _, err := js.PublishMsgAsync(m); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func startVariant(ctx context.Context, nc *nats.Conn, ns *server.Server, cfg Config, v string, count func()) (func(), error) {
	switch v {
	case Unordered:
		return startJetfn(ctx, nc, cfg, "", count)
	case Ordered:
		return startJetfn(ctx, nc, cfg, fmt.Sprintf("    key: {token: 2}\n    ordered: true\n    partitions: %d\n", cfg.PartitionCount()), count)
	case Routed:
		return startJetfn(ctx, nc, cfg, fmt.Sprintf("    key: {header: %s}\n    ordered: true\n    partitions: %d\n", keyHeader, cfg.PartitionCount()), count)
	case Partitioned:
		return startPartitioned(ctx, nc, cfg, 1, count)
	case CopyCeiling:
		return startPartitioned(ctx, nc, cfg, cfg.Concurrency, count)
	case IngestPartitioned:
		return startIngestPartitioned(ctx, nc, cfg, 1, count)
	case IngestCeiling:
		return startIngestPartitioned(ctx, nc, cfg, cfg.Concurrency, count)
	}
	return nil, fmt.Errorf("unknown variant %q", v)
}

// startJetfn runs the no-op function with the extra manifest lines.
func startJetfn(ctx context.Context, nc *nats.Conn, cfg Config, lines string, count func()) (func(), error) {
	m, err := manifest.Parse([]byte(fmt.Sprintf(`
streams:
  - name: %s
    subjects: ["bench.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: %s
    version: 1.0.0
    stream: %s
    subject: %s
    concurrency: %d
%s`, stream, durable, stream, subject, cfg.Concurrency, lines)))
	if err != nil {
		return nil, err
	}
	noop := jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { count(); return nil })
	fns := []jetfn.Function{{Name: durable, New: func(jetfn.Deps) (jetfn.Handler, error) { return noop, nil }}}
	rt, err := runtime.New(nc, m, fns, runtime.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	return func() { <-done }, nil
}

// startPartitioned is the client-side alternative: the keyed stream jetfn
// makes, made by hand, and one Consume per partition consumer (pending
// messages pending each: 1 keeps each key's order), acking after the
// handler.
func startPartitioned(ctx context.Context, nc *nats.Conn, cfg Config, pending int, count func()) (func(), error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	p := cfg.PartitionCount()
	ks := "PARTITIONED"
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: ks, Retention: jetstream.WorkQueuePolicy,
		Sources: []*jetstream.StreamSource{{Name: stream, SubjectTransforms: []jetstream.SubjectTransformConfig{
			{Source: subject, Destination: fmt.Sprintf("{{partition(%d,1)}}.bench.{{wildcard(1)}}", p)}}}}})
	if err != nil {
		return nil, err
	}
	return consumePartitions(ctx, js, ks, p, "%d.>", pending, count)
}

// startIngestPartitioned reads the input partitioned as it was stored
// (inputStream) with one consumer per partition, pending messages pending
// each.
func startIngestPartitioned(ctx context.Context, nc *nats.Conn, cfg Config, pending int, count func()) (func(), error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return consumePartitions(ctx, js, stream, cfg.PartitionCount(), "bench.%d.*", pending, count)
}

// consumePartitions reads stream s with p partition consumers, consumer i
// filtered on fmt.Sprintf(filter, i) and allowed pending unacknowledged
// messages, each consumed by its own Consume that acks after the handler.
func consumePartitions(ctx context.Context, js jetstream.JetStream, s string, p int, filter string, pending int,
	count func()) (func(), error) {
	var stops []func()
	for i := range p {
		c, err := js.CreateConsumer(ctx, s, jetstream.ConsumerConfig{Durable: fmt.Sprintf("p%d", i), AckPolicy: jetstream.AckExplicitPolicy,
			MaxAckPending: pending, FilterSubject: fmt.Sprintf(filter, i)})
		if err != nil {
			return nil, err
		}
		cc, err := c.Consume(func(m jetstream.Msg) { count(); _ = m.Ack() })
		if err != nil {
			return nil, err
		}
		stops = append(stops, cc.Stop)
	}
	return func() {
		<-ctx.Done()
		for _, stop := range stops {
			stop()
		}
	}, nil
}

// heapInUse is the heap in use after a collection: the drained variant's
// and the embedded server's, both still running.
func heapInUse() uint64 {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
