// Package remotenode runs the Node remote function in this directory
// against the embedded stack: a real nats-server, FerretDB through the
// official MongoDB Node driver, and jetfn's runtime binding it by manifest.
package remotenode

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/test/crash"
	"github.com/jetfn/jetfn/wire"
)

// examples/remote-go/manifest.yaml's function, with a shorter ackWait so the
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
    version: 1.0.0
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

// TestNodeRemote publishes greetings: one whose first ack is dropped on
// its way to the server, so the remote gets it twice; one while the
// remote's Mongo is down, so the remote answers 503 with Retry-After until
// it is back; one without a message ID (its key is then <stream>:<seq>);
// and one that is not JSON. Each good input must leave one document and
// one greet.done with jetfn's scoped message ID; the bad one a dead letter
// with the remote's reason and nothing else.
func TestNodeRemote(t *testing.T) {
	requireNode(t)
	s := startStack(t)

	twice := s.redelivered(t, `{"name":"Ana"}`, "req-ana")
	waited := s.duringMongoOutage(t, `{"name":"Dora"}`, "req-dora")
	good := []input{twice, waited, s.publish(t, `{"name":"Ben"}`, "req-ben"), s.publish(t, `{"name":"Cleo"}`, "")}
	bad := s.publish(t, `not json`, "req-bad")
	s.awaitSettled(t, bad.seq)

	checkDocuments(t, s.db.Collection("greetings"), good)
	checkOutputs(t, s.js, good)
	checkDeadLetter(t, s.js, bad, "payload is not JSON")
}

// redelivered publishes one input with jetfn's acks dropped until the
// first is, so the server redelivers it after ackWait and the remote
// handles it twice.
func (s *stack) redelivered(t *testing.T, data, msgID string) input {
	t.Helper()
	before := s.consumerInfo(t).Delivered.Consumer
	s.jetfnProxy.Set(crash.ClassAck, crash.Drop)
	in := s.publish(t, data, msgID)
	runtimetest.Eventually(t, 10*time.Second, "the dropped ack of the first delivery", func() bool {
		return s.jetfnProxy.Count(crash.ClassAck, crash.Drop) > 0
	})
	s.jetfnProxy.Reset()
	s.awaitSettled(t, in.seq)
	if n := s.consumerInfo(t).Delivered.Consumer - before; n != 2 {
		t.Fatalf("%s delivered %d times, want 2: once and its redelivery", msgID, n)
	}
	return in
}

// duringMongoOutage stops the remote's Mongo, publishes one input, waits
// for the remote's 503 with Retry-After for it, then starts Mongo again.
func (s *stack) duringMongoOutage(t *testing.T, data, msgID string) input {
	t.Helper()
	errs := s.errorReplies(t)
	s.stopMongo(t)
	in := s.publish(t, data, msgID)
	runtimetest.Eventually(t, 20*time.Second, "the remote's 503 reply", func() bool {
		return slices.Contains(errs(), "503 Retry-After 1")
	})
	s.startMongo(t)
	s.awaitSettled(t, in.seq)
	return in
}

// input is one published request and the key jetfn gives it (msg.ID()).
type input struct {
	name, key string
	seq       uint64
}

func (s *stack) publish(t *testing.T, data, msgID string) input {
	t.Helper()
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := s.js.Publish(t.Context(), inputSubject, []byte(data), opts...)
	if err != nil {
		t.Fatal(err)
	}
	in := input{key: msgID, seq: ack.Sequence}
	if in.key == "" {
		stream, err := s.js.Stream(t.Context(), ack.Stream)
		if err != nil {
			t.Fatal(err)
		}
		in.key = jetfn.StoredMsgID(ack.Stream, runtime.StreamIdentity(stream.CachedInfo().Created), ack.Sequence)
	}
	var req struct{ Name string }
	if json.Unmarshal([]byte(data), &req) == nil {
		in.name = req.Name
	}
	return in
}

// awaitSettled waits until the function's consumer has acked (or
// terminated) everything up to stream sequence seq.
func (s *stack) awaitSettled(t *testing.T, seq uint64) {
	t.Helper()
	runtimetest.Eventually(t, 30*time.Second, fmt.Sprintf("the ack of stream sequence %d", seq), func() bool {
		c, err := s.js.Consumer(t.Context(), "GREETINGS", functionName)
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		return err == nil && info.AckFloor.Stream >= seq && info.NumAckPending == 0
	})
}

func (s *stack) consumerInfo(t *testing.T) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := s.js.Consumer(t.Context(), "GREETINGS", functionName)
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
		want = append(want, greeting{ID: in.key, Name: in.name, Greeting: "hello, " + in.name})
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
		MsgID, Greeting, Request string
	}
	var got []output
	for _, m := range runtimetest.StreamMessages(t, js, "GREETINGS") {
		if m.Subject != outputSubj {
			continue
		}
		var data struct{ Greeting, Request string }
		if err := json.Unmarshal(m.Data, &data); err != nil {
			t.Fatalf("greet.done #%d: %v", m.Sequence, err)
		}
		got = append(got, output{MsgID: m.Header.Get(jetstream.MsgIDHeader), Greeting: data.Greeting, Request: data.Request})
	}
	var want []output
	for _, in := range good {
		id, err := jetfn.OutputMsgID(functionName, outputSubj, in.key)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, output{MsgID: id, Greeting: "hello, " + in.name, Request: in.key})
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
	if got := dl.Header.Get(wire.HeaderStreamSequence); got != fmt.Sprint(bad.seq) {
		t.Errorf("dead letter of stream sequence %s, want %d", got, bad.seq)
	}
	if got := dl.Header.Get(wire.HeaderError); !strings.Contains(got, reason) {
		t.Errorf("dead letter reason %q, want it to contain %q", got, reason)
	}
	if string(dl.Data) != "not json" {
		t.Errorf("dead letter payload %q, want the original", dl.Data)
	}
}

// TestDocsQuoteTheExample keeps the Node blocks of the README and of
// docs/remote.md verbatim parts of index.js, so the code a team reads there
// is the code this directory's test runs.
func TestDocsQuoteTheExample(t *testing.T) {
	source, err := os.ReadFile("index.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"../../README.md", "../../docs/remote.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(text), "```js\n")[1:]
		if len(blocks) == 0 {
			t.Errorf("%s has no ```js block", doc)
		}
		for _, b := range blocks {
			block, _, _ := strings.Cut(b, "```")
			if !strings.Contains(string(source), block) {
				t.Errorf("this block of %s is not in index.js word for word:\n%s", doc, block)
			}
		}
	}
}
