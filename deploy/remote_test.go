package deploy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// remoteBeta is a remote function on test.b, served by remote.beta, with one
// output per message.
const remoteBeta = "  - {name: remote-beta, version: 1.0.0, stream: TEST, subject: test.b, ackWait: 5s, concurrency: 4, " +
	"remote: {subject: remote.beta}, outputs: [{subject: test.greeted, stream: TEST}]}\n"

// greetRemotely is the remote's handler: it counts each input in h, keyed
// by Jetfn-Msg-Id as a remote keys its effects, and replies with one
// output that names the input.
func greetRemotely(h *handled) func(micro.Request, int) {
	return func(req micro.Request, _ int) {
		id := req.Headers().Get(wire.HeaderRemoteMsgID)
		h.mu.Lock()
		h.times[id]++
		h.mu.Unlock()
		data, _ := json.Marshal(map[string]string{"greeted": id})
		body, _ := json.Marshal(map[string]any{"outputs": []map[string]any{
			{"subject": "test.greeted", "data": json.RawMessage(data), "key": id}}})
		_ = req.Respond(body)
	}
}

// TestLiveDeployRemote runs two instances that follow one deployment, and
// two instances of a remote service, under a steady publish stream on a
// compiled-in function's subject and on the remote function's, whose
// messages wait in the stream until a revision adds the remote function;
// a later revision changes its entry, which re-binds it. Every instance
// binds it without a restart; every message is handled once, at the remote
// (counted by Jetfn-Msg-Id) and in the outputs stored.
func TestLiveDeployRemote(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	admin := runtimetest.Connect(t, ns.ClientURL())
	js, _ := jetstream.New(admin)
	ctx := context.Background()
	h := &handled{times: map[string]int{}}
	fns := []jetfn.Function{h.fn("alpha")}
	atRemote := &handled{times: map[string]int{}}
	for range 2 {
		runtimetest.StartRemote(t, ns.ClientURL(), "beta-service", "remote.beta", greetRemotely(atRemote))
	}
	first, err := Store(ctx, js, "app", manifestWith(alpha("2s")))
	if err != nil {
		t.Fatal(err)
	}
	instances := []*runtime.Runtime{startInstance(t, ns.ClientURL(), fns, first), startInstance(t, ns.ClientURL(), fns, first)}
	pub := startPublisher(t, js)
	pub.betaOn.Store(true)
	runtimetest.Eventually(t, publishedWithin, "messages waiting for the remote function", func() bool {
		return len(pub.ids("test.b")) >= 100
	})
	withRemote := manifestWith(alpha("2s"), remoteBeta)
	before := len(pub.ids("test.b"))
	if _, err := Store(ctx, js, "app", withRemote); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runtimetest.Eventually(t, 30*time.Second, "remote-beta bound on both instances", func() bool {
		for _, rt := range instances {
			if _, ok := rt.Manifest().Function("remote-beta"); !ok || len(rt.Stats()) != 2 {
				return false
			}
		}
		return true
	})
	t.Logf("remote-beta bound on both instances %s after the revision was stored", time.Since(start).Round(time.Millisecond))
	bound := len(pub.ids("test.b"))
	runtimetest.Eventually(t, publishedWithin, "more published after the deploy", func() bool {
		return len(pub.ids("test.b")) >= bound+200
	})
	// A changed entry re-binds: the new binding starts, the old one drains.
	rebound := manifestWith(alpha("2s"), strings.Replace(remoteBeta, "concurrency: 4", "concurrency: 2", 1))
	if _, err := Store(ctx, js, "app", rebound); err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 30*time.Second, "remote-beta re-bound on both instances", func() bool {
		for _, rt := range instances {
			if f, _ := rt.Manifest().Function("remote-beta"); f.Concurrency != 2 {
				return false
			}
		}
		return true
	})
	changed := len(pub.ids("test.b"))
	runtimetest.Eventually(t, publishedWithin, "more published after the change", func() bool {
		return len(pub.ids("test.b")) >= changed+200
	})
	pub.halt()

	ids := pub.ids("test.b")
	t.Logf("remote-beta: %d published, %d of them before the revision was stored", len(ids), before)
	checkOnce(t, atRemote, ids, js, "remote-beta")
	// The remote's effect comes first, its output a publish later. The wait
	// counts the outputs stored, one request a poll; reading them all (one
	// request a message, test.a's and test.b's too) took seconds a poll
	// under load, and is done once.
	runtimetest.Eventually(t, 30*time.Second, "an output for every input", func() bool {
		return subjectCount(t, js, "TEST", "test.greeted") >= uint64(len(ids))
	})
	outputs := greeted(t, js)
	for _, rt := range instances {
		for _, s := range rt.Stats() {
			if s.Function == "remote-beta" {
				t.Logf("instance handled %d remote-beta messages", s.Handled)
			}
		}
	}
	t.Logf("remote-beta: %d outputs stored for %d inputs", len(outputs), len(ids))
	for _, id := range ids {
		if outputs[id] != 1 {
			t.Errorf("input %s has %d outputs stored, want 1", id, outputs[id])
		}
	}
	if len(outputs) != len(ids) {
		t.Errorf("%d distinct outputs for %d inputs", len(outputs), len(ids))
	}
	checkOnce(t, h, pub.ids("test.a"), js, "alpha")
}

// subjectCount is how many messages on subject the stream holds.
func subjectCount(t *testing.T, js jetstream.JetStream, stream, subject string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// greeted counts the stored test.greeted outputs per input they name.
func greeted(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range runtimetest.StreamMessages(t, js, "TEST") {
		if m.Subject != "test.greeted" {
			continue
		}
		var v struct {
			Greeted string `json:"greeted"`
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatalf("output %q: %v", m.Data, err)
		}
		out[v.Greeted]++
	}
	return out
}
