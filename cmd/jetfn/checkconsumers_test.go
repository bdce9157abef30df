package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestCheckServerSaysWhereConsumersStart (issue 29, item 2): before a
// deploy, check --server says for each function whether its consumer
// exists, or where jetfn would start it and how many stored messages that
// hands to the function.
func TestCheckServerSaysWhereConsumersStart(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.yaml")
	write := func(start string) {
		text := strings.Replace(remoteManifestText, "    subject: greet.requested\n", "    subject: greet.requested\n"+start, 1)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := func() string {
		var out bytes.Buffer
		realMain(ctx, []string{"check", "--manifest", path, "--server", ns.ClientURL()}, &out, &out)
		return out.String()
	}
	write("")
	if out, want := check(), "remote-greet: stream GREETINGS does not exist yet"; !strings.Contains(out, want) {
		t.Errorf("before the stream exists:\n%s\nwant %q", out, want)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "GREETINGS", Subjects: []string{"greet.>"}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "greet.requested", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ start, want string }{
		{start: "", want: "remote-greet: consumer remote-greet is missing on GREETINGS; jetfn would create it: no recorded position; manifest start all: every stored message: 3 stored messages to handle"},
		{start: "    start: new\n", want: "manifest start new: only messages stored from now on: 0 stored messages to handle"},
	}
	for _, tt := range tests {
		write(tt.start)
		if out := check(); !strings.Contains(out, tt.want) {
			t.Errorf("start %q:\n%s\nwant %q", tt.start, out, tt.want)
		}
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "GREETINGS", jetstream.ConsumerConfig{Durable: "remote-greet", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if out, want := check(), "remote-greet: consumer remote-greet exists on GREETINGS (delivered up to stream sequence 0, 3 pending)"; !strings.Contains(out, want) {
		t.Errorf("with the consumer:\n%s\nwant %q", out, want)
	}
	s, _ := js.Stream(ctx, "GREETINGS")
	if names := s.ListConsumers(ctx); names != nil {
		n := 0
		for range names.Info() {
			n++
		}
		if n != 1 {
			t.Errorf("%d consumers on GREETINGS after the checks, want only the durable: the counting consumers stay behind", n)
		}
	}
}

// TestCheckServerSeesKeyedStreams: for a keyed function check --server
// speaks of its keyed stream, not of a consumer on its input, and refuses
// (exit 1), as deploy would, a change of partitions while the keyed
// stream holds messages.
func TestCheckServerSeesKeyedStreams(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	shipped, err := os.ReadFile("../../manifests/local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "app.yaml")
	check := func(text string) (int, string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		code := realMain(ctx, []string{"check", "--manifest", path, "--server", ns.ClientURL()}, &out, &out)
		return code, out.String()
	}
	const fn, keyed = "publish-recording-event", "JETFN_KEYED_publish-recording-event"
	if code, out := check(string(shipped)); code != 0 || !strings.Contains(out, fn+": keyed stream "+keyed+" does not exist yet; jetfn would create it, with 16 partitions") {
		t.Fatalf("before the keyed stream exists: exit %d\n%s", code, out)
	}
	// A keyed stream as the runtime leaves it: 16 partition consumers and
	// a message not yet handled.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: keyed, Subjects: []string{"keyed-test.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		if _, err := js.CreateOrUpdateConsumer(ctx, keyed, jetstream.ConsumerConfig{Durable: fmt.Sprintf("%s-p%03d", fn, i), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, "keyed-test.0", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if code, out := check(string(shipped)); code != 0 || !strings.Contains(out, fn+": keyed stream "+keyed+" exists (16 partitions, 1 messages not yet handled)") {
		t.Fatalf("with the keyed stream: exit %d\n%s", code, out)
	}
	fewer := strings.Replace(string(shipped), "    partitions: 16\n", "    partitions: 8\n", 1)
	code, out := check(fewer)
	if want := "! function " + fn + ": keyed stream " + keyed + " holds 1 messages not yet handled"; code != 1 || !strings.Contains(out, want) {
		t.Fatalf("repartitioned: exit %d\n%s\nwant exit 1 and %q", code, out, want)
	}
}
