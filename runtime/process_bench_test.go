package runtime

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkProcess is one worker's cost for one message of a no-op
// handler, from its delivery to its Ack (sent to an ack subject nobody
// reads), without the pull. BenchmarkProcess/ack-only holds and forgets
// the delivery and acks, and nothing else: the difference is what jetfn
// adds on a worker to a hand-written loop that acks (issue 16: about 620 ns
// a message, then 370 once the start, the run context and the ack
// subject's parse were trimmed).
func BenchmarkProcess(b *testing.B) {
	srv := runtimetest.StartNATS(b)
	nc := runtimetest.Connect(b, srv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	spec := manifest.FunctionSpec{Name: "bench", Stream: "BENCH", Durable: "bench", Concurrency: 1,
		AckWait: 30 * time.Second, Heartbeat: 10 * time.Second, MaxDeliver: 5, MaxPayload: 1 << 20, Timeout: 10 * time.Second}
	bd := &binding{spec: spec, js: js, ackPrefix: ackPrefix(spec.Stream, spec.Durable), stats: newCounters(1), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		handler: jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { return nil })}
	bd.heartbeat.Store(int64(spec.Heartbeat))
	wk := &worker{stats: bd.stats.slot(0)}
	reply := "$JS.ACK.BENCH.bench.1.12345.12345.1764634123456789012.7"
	data := make([]byte, 128)
	b.Run("process", func(b *testing.B) {
		for b.Loop() {
			m := &nats.Msg{Subject: "bench.x", Reply: reply, Data: data}
			d := bd.unsettled.add(m, monoNow())
			if bd.process(context.Background(), d, wk) != stateSettled {
				b.Fatal("not settled")
			}
		}
	})
	b.Run("ack-only", func(b *testing.B) {
		for b.Loop() {
			m := &nats.Msg{Subject: "bench.x", Reply: reply, Data: data}
			d := bd.unsettled.add(m, monoNow())
			d.move(stateBuffered, stateRunning)
			bd.unsettled.finish(d)
			if err := nc.Publish(m.Reply, ackBody); err != nil {
				b.Fatal(err)
			}
		}
	})
}
