package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/ops/dlq"
	"github.com/jetfn/jetfn/ops/status"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// opsEnv is a running greeter for the status and dlq commands, with
// NATS_URL set for them.
func opsEnv(t *testing.T) (*nats.Conn, *runtime.Runtime) {
	t.Helper()
	ns := runtimetest.StartNATS(t)
	t.Setenv("NATS_URL", ns.ClientURL())
	t.Setenv("JETFN_MANIFEST", "")
	nc := runtimetest.Connect(t, ns.ClientURL())
	return nc, runtest.Start(t, nc, runtest.Manifest)
}

func TestStatusCommand(t *testing.T) {
	nc, rt := opsEnv(t)
	runtest.Publish(t, nc, "test.in", `{"name":"a"}`, "")
	runtimetest.Eventually(t, 10*time.Second, "one settled", func() bool { return runtest.Settled(rt, "greeter", 1) })

	var out bytes.Buffer
	if code := realMain(context.Background(), []string{"status", "--json", "--wait", "200ms"}, &out, &out); code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, out.String())
	}
	var instances []status.Instance
	if err := json.Unmarshal(out.Bytes(), &instances); err != nil || len(instances) != 1 ||
		instances[0].Function != "greeter" || instances[0].Stats.Acked != 1 {
		t.Fatalf("status --json = %s (%v), want one greeter with 1 acked", out.String(), err)
	}

	// --watch redraws until Ctrl-C: cancel once the second table is out.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &watchWriter{cancelAfter: 2, cancel: cancel}
	if code := realMain(ctx, []string{"status", "--watch", "--interval", "10ms", "--wait", "50ms"}, w, w); code != 0 {
		t.Fatalf("status --watch: exit %d: %s", code, w.String())
	}
	if !strings.Contains(w.String(), "greeter") {
		t.Errorf("status --watch printed:\n%s", w.String())
	}
}

// watchWriter cancels once it has seen cancelAfter table headers.
type watchWriter struct {
	mu          sync.Mutex
	buf         bytes.Buffer
	cancelAfter int
	cancel      context.CancelFunc
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Count(w.buf.String(), "FUNCTION") >= w.cancelAfter {
		w.cancel()
	}
	return n, err
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestDLQCommand(t *testing.T) {
	nc, rt := opsEnv(t)
	manifest := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(manifest, []byte(runtest.Manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	runtest.Publish(t, nc, "test.in", `{"name":"poison"}`, "greet-7")
	runtimetest.Eventually(t, 10*time.Second, "a dead letter", func() bool { return runtest.Settled(rt, "greeter", 1) })

	steps := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{name: "ls", args: []string{"dlq", "ls"}, wantOut: "poisoned greeting"},
		{name: "ls of another function", args: []string{"dlq", "ls", "--function", "nobody"}, wantOut: "no dead letters"},
		{name: "show", args: []string{"dlq", "show", "1", "--manifest", manifest}, wantOut: `{"name":"poison"}`},
		{name: "show a missing one", args: []string{"dlq", "show", "9"}, wantCode: 1, wantOut: "no such dead letter"},
		{name: "replay needs one target", args: []string{"dlq", "replay", "1", "--all"}, wantCode: 2, wantOut: "exactly one of"},
		{name: "dry run", args: []string{"dlq", "replay", "1", "--dry-run"}, wantOut: "1: would replay to test.in (stream TEST) as greet-7:replay:1"},
		{name: "dry run by error text", args: []string{"dlq", "replay", "--all", "--error", "POISONED", "--since", "1h", "--dry-run"},
			wantOut: "1: would replay to test.in (stream TEST) as greet-7:replay:1\ndlq replay: 1 of 1 done, 0 not replayed"},
		{name: "nothing selected", args: []string{"dlq", "replay", "--all", "--error", "nothing like it"}, wantOut: "dlq replay: 0 of 0 done"},
		{name: "a bad time", args: []string{"dlq", "replay", "--all", "--until", "yesterday"}, wantCode: 2, wantOut: "want an RFC 3339 time"},
		{name: "an empty range", args: []string{"dlq", "replay", "--all", "--since", "1h", "--until", "2h"}, wantCode: 2, wantOut: "selects nothing"},
		{name: "a filter on a SEQ", args: []string{"dlq", "replay", "1", "--error", "x"}, wantCode: 2, wantOut: "not a SEQ"},
		{name: "replay", args: []string{"dlq", "replay", "--manifest", manifest, "1"}, wantOut: "1: replayed to test.in as greet-7:replay:1"},
		{name: "replay again", args: []string{"dlq", "replay", "1"}, wantCode: 1, wantOut: "already replayed as greet-7:replay:1"},
		{name: "no subcommand", args: []string{"dlq"}, wantCode: 2, wantOut: "Usage: jetfn dlq"},
	}
	for _, st := range steps {
		var out bytes.Buffer
		code := realMain(context.Background(), st.args, &out, &out)
		if code != st.wantCode || !strings.Contains(out.String(), st.wantOut) {
			t.Fatalf("%s: exit %d, output:\n%s\nwant exit %d and %q", st.name, code, out.String(), st.wantCode, st.wantOut)
		}
	}

	// The greeter refuses the replay too: a second dead letter, listed as JSON.
	runtimetest.Eventually(t, 10*time.Second, "the replay dead-lettered", func() bool { return runtest.Settled(rt, "greeter", 2) })
	var out bytes.Buffer
	if code := realMain(context.Background(), []string{"dlq", "ls", "--json"}, &out, &out); code != 0 {
		t.Fatalf("dlq ls --json: exit %d: %s", code, out.String())
	}
	var letters []dlq.Letter
	if err := json.Unmarshal(out.Bytes(), &letters); err != nil || len(letters) != 1 || letters[0].OriginalMsgID != "greet-7:replay:1" {
		t.Fatalf("dlq ls --json = %s (%v), want the replay's dead letter", out.String(), err)
	}
}

// TestWithoutAStack: the demos and summaries, run before `task run`, say
// to start it in one line, without the Mongo driver's topology dump.
func TestWithoutAStack(t *testing.T) {
	nothing := func() string { return "127.0.0.1:" + strconv.Itoa(freePort(t)) }
	ns := runtimetest.StartNATS(t)
	tests := []struct {
		name    string
		args    []string
		natsURL string
		wantOut string
	}{
		{name: "no NATS", args: []string{"simulate", "call"}, natsURL: "nats://" + nothing(),
			wantOut: "no NATS server answered at NATS_URL"},
		{name: "NATS but no MongoDB", args: []string{"simulate", "recording"}, natsURL: ns.ClientURL(),
			wantOut: "no MongoDB answered at MONGO_URI"},
		{name: "summaries without MongoDB", args: []string{"summaries"},
			wantOut: "no MongoDB answered at MONGO_URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NATS_URL", tt.natsURL)
			t.Setenv("MONGO_URI", "mongodb://"+nothing()+"/")
			var out bytes.Buffer
			start := time.Now()
			code := realMain(context.Background(), tt.args, &out, &out)
			t.Logf("exit %d after %s: %s", code, time.Since(start).Round(time.Millisecond), out.String())
			if code != 2 || !strings.Contains(out.String(), tt.wantOut) || !strings.Contains(out.String(), "start `go tool task run` first") ||
				strings.Contains(out.String(), "topology") {
				t.Errorf("want exit 2, %q and what to start, without the driver's topology", tt.wantOut)
			}
		})
	}
}

// TestPauseCommand: pause and resume a function by name, with status
// saying so between; mistakes get their exit codes.
func TestPauseCommand(t *testing.T) {
	_, rt := opsEnv(t)
	steps := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{name: "pause", args: []string{"pause", "greeter", "--until", "30m"}, wantOut: "paused greeter until 20"},
		{name: "status", args: []string{"status", "--wait", "200ms"}, wantOut: "paused until 20"},
		{name: "pause until resumed", args: []string{"pause", "--", "greeter"}, wantOut: "paused greeter until `jetfn resume greeter`: 1 consumers (TEST/greeter)"},
		{name: "status", args: []string{"status", "--wait", "200ms"}, wantOut: "paused until resumed (jetfn resume)"},
		{name: "resume", args: []string{"resume", "greeter"}, wantOut: "resumed greeter: 1 consumers (TEST/greeter)"},
		{name: "an unknown function", args: []string{"pause", "nobody"}, wantCode: 1, wantOut: "no consumer of that function on this server: nobody"},
		{name: "a time past", args: []string{"pause", "greeter", "--until", "2020-01-01T00:00:00Z"}, wantCode: 2, wantOut: "is not in the future"},
		{name: "no function", args: []string{"resume"}, wantCode: 2, wantOut: "give exactly one FUNCTION"},
	}
	for _, st := range steps {
		if st.name == "status" {
			// the instance reads the pause from its consumer's info
			runtimetest.Eventually(t, 10*time.Second, "the pause in the stats", func() bool { return rt.Stats()[0].PausedUntil != nil })
		}
		var out bytes.Buffer
		code := realMain(context.Background(), st.args, &out, &out)
		if code != st.wantCode || !strings.Contains(out.String(), st.wantOut) {
			t.Fatalf("%s: exit %d, output:\n%s\nwant exit %d and %q", st.name, code, out.String(), st.wantCode, st.wantOut)
		}
	}
}

// TestRewindCommand: a dry run says what a rewind does, the real one asks
// first (or takes --yes), and the greeter handles the messages again.
func TestRewindCommand(t *testing.T) {
	nc, rt := opsEnv(t)
	manifest := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(manifest, []byte(runtest.Manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	runtest.Publish(t, nc, "test.in", `{"name":"a"}`, "")
	runtest.Publish(t, nc, "test.in", `{"name":"b"}`, "")
	runtimetest.Eventually(t, 10*time.Second, "two handled", func() bool { return runtest.Settled(rt, "greeter", 2) })
	confirmInput = strings.NewReader("n\n")
	t.Cleanup(func() { confirmInput = os.Stdin })
	steps := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{name: "dry run", args: []string{"rewind", "greeter", "--to", "1", "--dry-run", "--manifest", manifest},
			wantOut: "greeter: consumer greeter on TEST would deliver stream sequence 1 next: 2 messages are handled again (the function has no outputs)"},
		{name: "not confirmed", args: []string{"rewind", "greeter", "--to", "1", "--manifest", manifest}, wantCode: 1, wantOut: "not rewound: not confirmed"},
		{name: "rewind", args: []string{"rewind", "greeter", "--to", "1", "--yes", "--manifest", manifest},
			wantOut: "rewound greeter: consumer greeter delivers stream sequence 1 next"},
		{name: "an unknown function", args: []string{"rewind", "nobody", "--to", "1", "--manifest", manifest}, wantCode: 1, wantOut: "has no function nobody"},
		{name: "no target", args: []string{"rewind", "greeter", "--to", "yesterday", "--manifest", manifest}, wantCode: 2, wantOut: "want a stream sequence"},
	}
	for _, st := range steps {
		var out bytes.Buffer
		code := realMain(context.Background(), st.args, &out, &out)
		if code != st.wantCode || !strings.Contains(out.String(), st.wantOut) {
			t.Fatalf("%s: exit %d, output:\n%s\nwant exit %d and %q", st.name, code, out.String(), st.wantCode, st.wantOut)
		}
	}
	runtimetest.Eventually(t, 10*time.Second, "the two handled again", func() bool { return runtest.Settled(rt, "greeter", 4) })
}
