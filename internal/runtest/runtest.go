// Package runtest runs a small jetfn function on a real embedded server for
// the tests of the operating tools (ops/..., metrics). It complements
// runtimetest, which starts the servers: here a Runtime is started with a
// test function and stopped, drained, when the test ends.
package runtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
)

// Manifest has a TEST stream (test.>), the dead-letter stream and one
// function "greeter" reading test.in, which retries a failure once before
// dead-lettering it.
const Manifest = `
streams:
  - name: TEST
    subjects: ["test.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: greeter
    version: 1.2.3
    stream: TEST
    subject: test.in
    ackWait: 5s
    maxDeliver: 2
    backoff: [10ms]
    concurrency: 2
`

// Greeting is the greeter's event: {"name": "..."}.
type Greeting struct {
	Name string `json:"name"`
}

// GreetingPayload is the greeter's contract: an object with a string name.
var GreetingPayload = jetfn.MustPayload[Greeting]([]byte(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["name"],
  "properties": {"name": {"type": "string"}}
}`))

// Greeter acks every greeting, except that the name "poison" is a permanent
// failure (dead-lettered at once) and "flaky" fails every delivery (nak'd,
// then dead-lettered on the last). A payload GreetingPayload refuses is
// malformed: dead-lettered at once.
var Greeter = jetfn.Function{Name: "greeter", New: func(jetfn.Deps) (jetfn.Handler, error) {
	return GreetingPayload.Handler(func(_ context.Context, _ jetfn.Msg, g Greeting) error {
		switch g.Name {
		case "poison":
			return jetfn.Permanent(errors.New("poisoned greeting"))
		case "flaky":
			return errors.New("flaky greeting")
		}
		return nil
	}), nil
}}

// New builds a Runtime for manifest with the greeter, without running it.
func New(t testing.TB, nc *nats.Conn, manifestYAML string, opts ...runtime.Option) *runtime.Runtime {
	t.Helper()
	m, err := manifest.Parse([]byte(manifestYAML))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(nc, m, []jetfn.Function{Greeter}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// Run runs rt until the test ends, then cancels and waits for the drain.
func Run(t testing.TB, rt *runtime.Runtime) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runtime: %v", err)
		}
	})
}

// Start builds and runs a Runtime and waits until it is ready.
func Start(t testing.TB, nc *nats.Conn, manifestYAML string, opts ...runtime.Option) *runtime.Runtime {
	t.Helper()
	rt := New(t, nc, manifestYAML, opts...)
	Run(t, rt)
	select {
	case <-rt.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("runtime not ready after 30s")
	}
	return rt
}

// Publish stores data on subject and fails the test if the stream does not
// acknowledge it. A non-empty msgID becomes the Nats-Msg-Id header.
func Publish(t testing.TB, nc *nats.Conn, subject, data, msgID string) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, subject, []byte(data), opts...); err != nil {
		t.Fatalf("publishing to %s: %v", subject, err)
	}
}

// Settled reports whether every function in rt has handled want messages to
// an end (acked or termed) and has nothing in flight.
func Settled(rt *runtime.Runtime, function string, want uint64) bool {
	for _, s := range rt.Stats() {
		if s.Function == function {
			return s.Acked+s.Termed >= want && s.InFlight == 0 && s.NumAckPending == 0
		}
	}
	return false
}
