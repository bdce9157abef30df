// Package remotenode runs the Node remote function in this directory
// against the embedded stack: a real nats-server, FerretDB through the
// official MongoDB Node driver, and jetfn's runtime binding it by manifest.
package remotenode

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/test/crash"
)

// The function as the README's manifest names it. ackWait is short so the
// redelivery after a lost ack comes quickly; the remote answers in
// milliseconds, well inside it.
const (
	functionName = "remote-greet"
	inputSubject = "greet.requested"
	outputSubj   = "greet.done"
	testManifest = `
streams:
  - name: GREETINGS
    subjects: ["greet.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: remote-greet
    stream: GREETINGS
    subject: greet.requested
    ackWait: 2s
    maxDeliver: 5
    backoff: [1s]
    concurrency: 4
    timeout: 5s
    remote:
      subject: greeter.handle
    outputs:
      - subject: greet.done
        stream: GREETINGS
`
)

// greeting is a document the example stores.
type greeting struct {
	ID       string `bson:"_id"`
	Name     string `bson:"name"`
	Greeting string `bson:"greeting"`
}

// TestNodeRemote publishes greetings (one with its own message ID, one
// without, whose key is then <stream>:<seq>), one delivered twice because
// its first ack is dropped on the way to the server, and one that is not
// JSON. Each good input must leave one document and one greet.done with
// jetfn's scoped message ID; the bad one a dead letter with the remote's
// reason and nothing else.
func TestNodeRemote(t *testing.T) {
	requireNode(t)
	ns := runtimetest.StartNATS(t)
	mongoSrv, mc := runtimetest.StartMongo(t)
	db := mc.Database("remote_node")
	startNodeRemote(t, ns.ClientURL(), mongoSrv.URI, db.Name())

	// jetfn reaches NATS through a proxy that can drop its acks, so one
	// input gets a real second delivery.
	proxy, err := crash.StartProxy(strings.TrimPrefix(ns.ClientURL(), "nats://"), outputSubj, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	startRuntime(t, proxy.URL())

	nc := runtimetest.Connect(t, ns.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Set(crash.ClassAck, crash.Drop)
	twice := publish(t, js, `{"name":"Ana"}`, "req-ana")
	runtimetest.Eventually(t, 10*time.Second, "the dropped ack of the first delivery", func() bool {
		return proxy.Count(crash.ClassAck, crash.Drop) > 0
	})
	proxy.Reset()
	awaitSettled(t, js, twice.seq)
	if info := consumerInfo(t, js); info.Delivered.Consumer != 2 {
		t.Fatalf("consumer delivered %d times, want 2: the input once and its redelivery", info.Delivered.Consumer)
	}

	good := []input{twice, publish(t, js, `{"name":"Ben"}`, "req-ben"), publish(t, js, `{"name":"Cleo"}`, "")}
	bad := publish(t, js, `not json`, "req-bad")
	awaitSettled(t, js, bad.seq)

	checkDocuments(t, db.Collection("greetings"), good)
	checkOutputs(t, js, good)
	checkDeadLetter(t, js, bad, "payload is not JSON")
}

// input is one published request and the key jetfn gives it (msg.ID()).
type input struct {
	name, key string
	seq       uint64
}

func publish(t *testing.T, js jetstream.JetStream, data, msgID string) input {
	t.Helper()
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := js.Publish(t.Context(), inputSubject, []byte(data), opts...)
	if err != nil {
		t.Fatal(err)
	}
	in := input{key: msgID, seq: ack.Sequence}
	if in.key == "" {
		in.key = fmt.Sprintf("%s:%d", ack.Stream, ack.Sequence)
	}
	var req struct{ Name string }
	if json.Unmarshal([]byte(data), &req) == nil {
		in.name = req.Name
	}
	return in
}

// awaitSettled waits until the function's consumer has acked (or
// terminated) everything up to stream sequence seq.
func awaitSettled(t *testing.T, js jetstream.JetStream, seq uint64) {
	t.Helper()
	runtimetest.Eventually(t, 30*time.Second, fmt.Sprintf("the ack of stream sequence %d", seq), func() bool {
		c, err := js.Consumer(t.Context(), "GREETINGS", functionName)
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		return err == nil && info.AckFloor.Stream >= seq && info.NumAckPending == 0
	})
}

func consumerInfo(t *testing.T, js jetstream.JetStream) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := js.Consumer(t.Context(), "GREETINGS", functionName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// checkDocuments wants exactly one greeting per good input, under its key,
// and nothing else: the redelivered input upserted the same document.
func checkDocuments(t *testing.T, coll *mongo.Collection, good []input) {
	t.Helper()
	cur, err := coll.Find(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var got []greeting
	if err := cur.All(t.Context(), &got); err != nil {
		t.Fatal(err)
	}
	var want []greeting
	for _, in := range good {
		want = append(want, greeting{ID: in.key, Name: in.name, Greeting: "Hello, " + in.name + "!"})
	}
	byID := func(a, b greeting) int { return strings.Compare(a.ID, b.ID) }
	slices.SortFunc(want, byID)
	slices.SortFunc(got, byID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("greetings (-want +got):\n%s", diff)
	}
}

// checkOutputs wants exactly one greet.done per good input, with jetfn's
// scoped message ID and the data the remote replied with.
func checkOutputs(t *testing.T, js jetstream.JetStream, good []input) {
	t.Helper()
	type output struct {
		MsgID, Name, Greeting string
	}
	var got []output
	for _, m := range runtimetest.StreamMessages(t, js, "GREETINGS") {
		if m.Subject != outputSubj {
			continue
		}
		var data struct{ Name, Greeting string }
		if err := json.Unmarshal(m.Data, &data); err != nil {
			t.Fatalf("greet.done #%d: %v", m.Sequence, err)
		}
		got = append(got, output{MsgID: m.Header.Get(jetstream.MsgIDHeader), Name: data.Name, Greeting: data.Greeting})
	}
	var want []output
	for _, in := range good {
		id, err := jetfn.OutputMsgID(functionName, outputSubj, in.key)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, output{MsgID: id, Name: in.name, Greeting: "Hello, " + in.name + "!"})
	}
	byID := func(a, b output) int { return strings.Compare(a.MsgID, b.MsgID) }
	slices.SortFunc(want, byID)
	slices.SortFunc(got, byID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("greet.done outputs (-want +got):\n%s", diff)
	}
}

// checkDeadLetter wants the bad input dead-lettered once, with the
// remote's 400 description as the reason.
func checkDeadLetter(t *testing.T, js jetstream.JetStream, bad input, reason string) {
	t.Helper()
	dls := runtimetest.StreamMessages(t, js, "DEADLETTER")
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	dl := dls[0]
	if got := dl.Header.Get(runtime.HeaderStreamSequence); got != fmt.Sprint(bad.seq) {
		t.Errorf("dead letter of stream sequence %s, want %d", got, bad.seq)
	}
	if got := dl.Header.Get(runtime.HeaderError); !strings.Contains(got, reason) {
		t.Errorf("dead letter reason %q, want it to contain %q", got, reason)
	}
	if string(dl.Data) != "not json" {
		t.Errorf("dead letter payload %q, want the original", dl.Data)
	}
}

// startRuntime runs jetfn's runtime with the test manifest until the test
// ends; remote-greet is in no registry, so no compiled-in functions.
func startRuntime(t *testing.T, natsURL string) {
	t.Helper()
	m, err := manifest.Parse([]byte(testManifest))
	if err != nil {
		t.Fatal(err)
	}
	nc := runtimetest.Connect(t, natsURL)
	rt, err := runtime.New(nc, m, nil, runtime.WithDrainTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
}

// requireNode skips when this machine cannot run the example; CI installs
// its packages (.ci/run: npm ci --prefix examples/remote-node), so it never
// skips there.
func requireNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: install Node.js 20.19 or later to run the Node remote example")
	}
	if _, err := os.Stat("node_modules"); err != nil {
		t.Skip("examples/remote-node/node_modules is missing: run `npm ci --prefix examples/remote-node`")
	}
}

// startNodeRemote runs `node index.js` until the test ends and waits until
// its micro service answers a ping. At the end it sends SIGTERM and wants
// a clean exit: the example drains its requests in flight.
func startNodeRemote(t *testing.T, natsURL, mongoURI, database string) {
	t.Helper()
	var out runtimetest.LogBuffer
	cmd := exec.Command("node", "index.js")
	cmd.Env = append(os.Environ(), "NATS_URL="+natsURL, "MONGO_URI="+mongoURI, "MONGO_DATABASE="+database)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("node remote exited with %v after SIGTERM; its output:\n%s", err, out.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("node remote still running 10s after SIGTERM; its output:\n%s", out.String())
		}
	})
	nc := runtimetest.Connect(t, natsURL)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := nc.Request("$SRV.PING.greeter", nil, 200*time.Millisecond)
		if err == nil {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("node remote exited before it answered a ping: %v; its output:\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node remote did not answer $SRV.PING.greeter within 30s (%v); its output:\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
