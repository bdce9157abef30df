package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// TestGreeterWithRuntime runs the example against an embedded NATS and
// FerretDB with the runtime on the example's manifest: a request is stored
// once (also when the remote gets it again), its greet.done output once,
// and a bad payload is dead-lettered with the remote's description.
func TestGreeterWithRuntime(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	_, client := runtimetest.StartMongo(t)
	greetings := client.Database("jetfn").Collection("greetings")
	svc, err := addService(runtimetest.Connect(t, ns.ClientURL()), &greeter{greetings: greetings, log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	m, err := manifest.Load("manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nc := runtimetest.Connect(t, ns.ClientURL())
	rt, err := runtime.New(nc, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.Publish(ctx, "greet.requested", []byte(`{"name":"Ada"}`), jetstream.WithMsgID("req-1")); err != nil {
		t.Fatal(err)
	}
	done := waitFor(t, js, "greet.done", 1)[0]
	if id := done.Header.Get("Nats-Msg-Id"); id != "jetfn:remote-greet:greet.done:req-1" || !strings.Contains(string(done.Data), `"greeting":"hello, Ada"`) {
		t.Errorf("output %s %s, want hello, Ada with the scoped ID of req-1", id, done.Data)
	}

	// A redelivery reaches the remote with the same Jetfn-Msg-Id: the
	// upsert finds its document, and the output's key is the same.
	again := &nats.Msg{Subject: Subject, Data: []byte(`{"name":"Ada"}`), Header: nats.Header{"Jetfn-Msg-Id": {"req-1"}}}
	reply, err := nc.RequestMsg(again, 5*time.Second)
	if err != nil || !strings.Contains(string(reply.Data), `"key":"req-1"`) {
		t.Fatalf("second request: %v, reply %q", err, reply.Data)
	}
	if n, err := greetings.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Errorf("%d greetings stored (%v), want 1", n, err)
	}

	if _, err := js.Publish(ctx, "greet.requested", []byte(`{"nome":"Ada"}`)); err != nil {
		t.Fatal(err)
	}
	dl := waitFor(t, js, "deadletter.remote-greet", 1)[0]
	if reason := dl.Header.Get(wire.HeaderError); !strings.Contains(reason, "replied 400: bad payload") {
		t.Errorf("dead letter reason %q, want the remote's 400", reason)
	}
	if n := len(waitFor(t, js, "greet.done", 1)); n != 1 {
		t.Errorf("%d greet.done outputs stored, want 1", n)
	}
}

// waitFor waits until n messages on subject are stored and returns them.
func waitFor(t *testing.T, js jetstream.JetStream, subject string, n int) []*jetstream.RawStreamMsg {
	t.Helper()
	stream := "GREETINGS"
	if strings.HasPrefix(subject, "deadletter.") {
		stream = "DEADLETTER"
	}
	var got []*jetstream.RawStreamMsg
	runtimetest.Eventually(t, 20*time.Second, subject, func() bool {
		got = got[:0]
		for _, m := range runtimetest.StreamMessages(t, js, stream) {
			if m.Subject == subject {
				got = append(got, m)
			}
		}
		return len(got) >= n
	})
	return got
}
