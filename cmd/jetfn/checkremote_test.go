package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

const remoteManifestText = `streams:
  - name: GREETINGS
    subjects: ["greet.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: remote-greet
    version: 1.0.0
    stream: GREETINGS
    subject: greet.requested
    remote:
      subject: greeter.handle
`

// TestCheckServerFindsRemote: check --server looks the remote endpoint up
// by micro discovery, refuses it at its line while nothing serves it, and
// names the service once one does.
func TestCheckServerFindsRemote(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	path := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(path, []byte(remoteManifestText), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func() (int, string) {
		var out bytes.Buffer
		code := realMain(context.Background(), []string{"check", "--manifest", path, "--server", ns.ClientURL()}, &out, &out)
		return code, out.String()
	}
	code, out := check()
	if want := path + ":12: functions[0] (remote-greet).remote.subject: no micro service on "; code != 1 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, output:\n%s\nwant exit 1 and %q", code, out, want)
	}
	runtimetest.StartRemote(t, ns.ClientURL(), "greeter", "greeter.handle", func(req micro.Request, _ int) { _ = req.Respond(nil) })
	code, out = check()
	if want := "remote-greet: remote greeter.handle is served by greeter 1.0.0 (1 instance)"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, output:\n%s\nwant exit 0 and %q", code, out, want)
	}
}

// TestCheckServerRefusesStoredRemoteSubject: check --server refuses, at
// the remote.subject line, a remote subject that a stream outside the
// manifest stores, even with the remote running: JetStream would answer
// every request with a PubAck and keep a copy of it.
func TestCheckServerRefusesStoredRemoteSubject(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	path := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(path, []byte(remoteManifestText), 0o600); err != nil {
		t.Fatal(err)
	}
	runtimetest.StartRemote(t, ns.ClientURL(), "greeter", "greeter.handle", func(req micro.Request, _ int) { _ = req.Respond(nil) })
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"greeter.>"}}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := realMain(context.Background(), []string{"check", "--manifest", path, "--server", ns.ClientURL()}, &out, &out)
	want := path + ":12: functions[0] (remote-greet).remote.subject: stream AUDIT (not in the manifest) stores greeter.handle"
	if code != 1 || !strings.Contains(out.String(), want) {
		t.Fatalf("exit %d, output:\n%s\nwant exit 1 and %q", code, out.String(), want)
	}
}
