package runtime_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
)

// greeting is a function's event type. Its JSON Schema, in greetingPayload,
// states every rule; a payload the schema refuses is malformed:
// dead-lettered, never retried, with every problem as the reason.
type greeting struct {
	Name string `json:"name"`
}

var greetingPayload = jetfn.MustPayload[greeting]([]byte(`{
  "type": "object",
  "required": ["name"],
  "properties": {"name": {"type": "string", "minLength": 1}}
}`))

// newGreeter is a function's constructor: it gets its Deps once, at start.
func newGreeter(deps jetfn.Deps) (jetfn.Handler, error) {
	return greetingPayload.Handler(func(ctx context.Context, msg jetfn.Msg, g greeting) error {
		fmt.Printf("hello, %s (delivery %d)\n", g.Name, msg.NumDelivered)
		// Key the output by the input (msg.ID is the same on every
		// redelivery), so a redelivery cannot store it twice and two
		// requests for the same name stay two; returning nil acks the input.
		return deps.Publisher.Publish(ctx, "greetings.sent", []byte(g.Name), msg.ID())
	}), nil
}

const exampleManifest = `
streams:
  - name: GREETINGS
    subjects: ["greetings.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: greeter
    version: 1.0.0
    stream: GREETINGS
    subject: greetings.requested
    ackWait: 5s
    outputs:
      - subject: greetings.sent
        stream: GREETINGS
`

// Example runs one function on an embedded nats-server: the manifest binds
// it to a durable consumer, and each message's handler result picks its ack.
func Example() {
	dir, _ := os.MkdirTemp("", "jetfn-example")
	defer os.RemoveAll(dir)
	ns, _ := devstack.StartNATS(devstack.NATSOptions{Port: -1, StoreDir: dir})
	defer devstack.StopNATS(ns)
	nc, _ := nats.Connect(ns.ClientURL())
	defer nc.Close()

	m, _ := manifest.Parse([]byte(exampleManifest))
	rt, err := runtime.New(nc, m, []jetfn.Function{{Name: "greeter", New: newGreeter}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- rt.Run(ctx) }()
	<-rt.Ready()

	js, _ := jetstream.New(nc)
	sent, _ := js.Stream(ctx, "GREETINGS")
	watch, _ := sent.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"greetings.sent"}})
	_, _ = js.Publish(ctx, "greetings.requested", []byte(`{"name":"Ada"}`))
	out, _ := watch.Next()
	fmt.Printf("published %s\n", out.Data())

	cancel() // drains: in-flight handlers finish first
	fmt.Println("run returned", <-done)
	// Output:
	// hello, Ada (delivery 1)
	// published Ada
	// run returned <nil>
}
