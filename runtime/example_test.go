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

// greeting is a function's event type: `required` keys must be present, and
// Validate refuses the rest of what the contract forbids. Either failure
// makes the message malformed: dead-lettered, never retried.
type greeting struct {
	Name string `json:"name" required:"true"`
}

func (g *greeting) Validate() error {
	if g.Name == "" {
		return fmt.Errorf("name is empty")
	}
	return nil
}

// newGreeter is a function's constructor: it gets its Deps once, at start.
func newGreeter(deps jetfn.Deps) (jetfn.Handler, error) {
	return jetfn.JSON(func(ctx context.Context, msg jetfn.Msg, g greeting) error {
		fmt.Printf("hello, %s (delivery %d)\n", g.Name, msg.NumDelivered)
		// Publish the output with a message ID, so a redelivery cannot
		// store it twice; returning nil then acks the input.
		return deps.Publisher.Publish(ctx, "greetings.sent", []byte(g.Name), "greeting:"+g.Name)
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
