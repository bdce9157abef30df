package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/deploy"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

const shortWindowManifest = `streams:
  - name: TRANSCRIPTION
    subjects: ["transcription.>", "transcript.>"]
    duplicates: 2m
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: summarize-session
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.session-ended
    ackWait: 6s
    maxOutage: 130s
    timeout: 2s
    outputs:
      - subject: transcript.processed
        stream: TRANSCRIPTION
`

// TestDeployShortWindowForEveryInstance is issue 29, item 6: `deploy
// --allow-short-window` stored a revision that every instance started
// without the flag refused, and, restarting, exited. Such a revision is
// now refused unless the manifest itself says allowShortWindow: true,
// which every instance honours. Before the fix the first deploy below
// stored revision 1.
func TestDeployShortWindowForEveryInstance(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	t.Setenv("NATS_URL", ns.ClientURL())
	dir := t.TempDir()
	deployFile := func(text string) (int, string) {
		path := filepath.Join(dir, "app.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		code := realMain(context.Background(), []string{"deploy", "--manifest", path, "--deployment", "app", "--allow-short-window", "--yes"}, &out, &out)
		return code, out.String()
	}
	code, out := deployFile(shortWindowManifest)
	if want := "Put `allowShortWindow: true` in the manifest"; code != 1 || !strings.Contains(out, want) {
		t.Fatalf("exit %d:\n%s\nwant exit 1 and %q", code, out, want)
	}
	js, _ := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if _, err := deploy.Load(context.Background(), js, "app"); err == nil {
		t.Fatal("the refused revision was stored")
	}
	code, out = deployFile("allowShortWindow: true\n" + shortWindowManifest)
	if code != 0 || !strings.Contains(out, "stored as revision") || !strings.Contains(out, "accepted by allowShortWindow") {
		t.Fatalf("exit %d:\n%s\nwant it stored, with the accepted window as a warning", code, out)
	}
}
