package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/deploy"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestRunStartsOnAcceptedRevision is issue 29, item 6: a deployment's
// current revision that this binary refuses (it names a function the
// binary lacks) made every restarting instance exit. It now starts on the
// newest earlier revision it accepts and says so. Before the fix `jetfn
// run --deployment app` exited 2 with `unknown function "gamma"`.
func TestRunStartsOnAcceptedRevision(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	mongo, _ := runtimetest.StartMongo(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	accepted := remoteManifestText
	refused := remoteManifestText + "  - {name: gamma, version: 1.0.0, stream: GREETINGS, subject: greet.other}\n"
	for _, raw := range []string{accepted, refused} {
		if _, err := deploy.Store(ctx, js, "app", []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("NATS_URL", ns.ClientURL())
	t.Setenv("MONGO_URI", mongo.URI)
	out := runArgsUntilReady(t, "run", "--deployment", "app")
	if want := "refuses the deployment's current revision"; !strings.Contains(out, want) || !strings.Contains(out, "running_revision=1") {
		t.Errorf("log:\n%s\nwant %q naming running_revision=1", out, want)
	}
}

// runArgsUntilReady runs jetfn with args in-process until it logs that it
// is ready, then cancels it and returns everything it wrote; it fails the
// test if it exits before.
func runArgsUntilReady(t *testing.T, args ...string) string {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- realMain(ctx, args, pw, pw)
		pw.Close()
	}()
	var all strings.Builder
	sc := bufio.NewScanner(pr)
	ready := false
	for sc.Scan() {
		all.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "runtime ready") && !ready {
			ready = true
			cancel()
		}
	}
	cancel()
	if c := <-code; c != 0 || !ready {
		t.Fatalf("exit %d, ready %v:\n%s", c, ready, all.String())
	}
	return all.String()
}
