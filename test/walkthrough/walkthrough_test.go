// Package walkthrough runs the README's "Adding a function" for real: its
// code blocks are written into a copy of this module, the copy's unit tests
// run, its jetfn binary is built and checks the manifest the README edits,
// and the new function handles a message on an embedded server.
package walkthrough

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// The README's blocks say where they go on their first line.
const (
	newFileMark  = "// file: "                   // a whole new file
	registryMark = "// in functions/registry.go" // lines added to All()'s list
	streamsMark  = "# under streams:"            // YAML added to manifests/local.yaml
	functionMark = "# under functions:"          // likewise
	sendMark     = "# walkthrough: send"         // subject and payload the test publishes
	expectMark   = "# walkthrough: expect"       // subject and payload of the output
)

func TestReadmeAddingAFunction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a copy of the module")
	}
	root := moduleRoot(t)
	blocks := readmeBlocks(t, filepath.Join(root, "README.md"), "## Adding a function")
	dir := copyModule(t, root)
	apply(t, dir, blocks)

	goCmd(t, dir, "vet", "./functions/...")
	goCmd(t, dir, "test", "-count=1", "./functions/...")
	bin := filepath.Join(t.TempDir(), "jetfn")
	goCmd(t, dir, "build", "-o", bin, "./cmd/jetfn")
	manifestPath := filepath.Join(dir, "manifests", "local.yaml")
	run(t, exec.Command(bin, "check", "--manifest", manifestPath))

	send, expect := exchange(t, blocks, sendMark), exchange(t, blocks, expectMark)
	ns := runtimetest.StartNATS(t)
	mongo, _ := runtimetest.StartMongo(t)
	child := exec.Command(bin, "run", "--manifest", manifestPath)
	child.Env = append(os.Environ(), "NATS_URL="+ns.ClientURL(), "MONGO_URI="+mongo.URI, "MONGO_DATABASE=walkthrough")
	var logs bytes.Buffer
	child.Stdout, child.Stderr = &logs, &logs
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Signal(os.Interrupt)
		_ = child.Wait()
		if t.Failed() {
			t.Logf("jetfn run:\n%s", logs.String())
		}
	})

	nc := runtimetest.Connect(t, ns.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := waitForOutput(t, ctx, js, send, expect)
	if !strings.HasPrefix(out.Header.Get(jetstream.MsgIDHeader), "jetfn:") {
		t.Errorf("output Nats-Msg-Id = %q, want one scoped by the runtime", out.Header.Get(jetstream.MsgIDHeader))
	}
}

// message is a subject and a payload from a send or expect block.
type message struct{ subject, data string }

// waitForOutput publishes send once the runtime has created the streams,
// then waits for an output matching expect.
func waitForOutput(t *testing.T, ctx context.Context, js jetstream.JetStream, send, expect message) *jetstream.RawStreamMsg {
	t.Helper()
	runtimetest.Eventually(t, 30*time.Second, "the runtime to bind the new function", func() bool {
		_, err := js.Publish(ctx, send.subject, []byte(send.data))
		return err == nil
	})
	var got *jetstream.RawStreamMsg
	runtimetest.Eventually(t, 30*time.Second, "the function's output on "+expect.subject, func() bool {
		stream, err := js.StreamNameBySubject(ctx, expect.subject)
		if err != nil {
			return false
		}
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false
		}
		got, err = s.GetLastMsgForSubject(ctx, expect.subject)
		return err == nil
	})
	if strings.TrimSpace(string(got.Data)) != expect.data {
		t.Fatalf("output on %s = %q, want %q", expect.subject, got.Data, expect.data)
	}
	return got
}

// readmeBlocks returns the fenced code blocks of one README section.
func readmeBlocks(t *testing.T, path, heading string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q section", heading)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []string
	var cur []string
	inBlock := false
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```") && !inBlock:
			inBlock, cur = true, nil
		case strings.HasPrefix(line, "```"):
			inBlock = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case inBlock:
			cur = append(cur, line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("README section %q has no code blocks", heading)
	}
	return blocks
}

// apply writes every block where its first line says.
func apply(t *testing.T, dir string, blocks []string) {
	t.Helper()
	for _, b := range blocks {
		first, rest, _ := strings.Cut(b, "\n")
		switch {
		case strings.HasPrefix(first, newFileMark):
			path := filepath.Join(dir, strings.TrimSpace(strings.TrimPrefix(first, newFileMark)))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, b)
		case strings.HasPrefix(first, registryMark):
			insertAfter(t, filepath.Join(dir, "functions", "registry.go"), "return []jetfn.Function{\n", rest)
		case strings.HasPrefix(first, streamsMark):
			insertAfter(t, filepath.Join(dir, "manifests", "local.yaml"), "\nstreams:\n", rest)
		case strings.HasPrefix(first, functionMark):
			insertAfter(t, filepath.Join(dir, "manifests", "local.yaml"), "\nfunctions:\n", rest)
		}
	}
}

// exchange reads a send or expect block: its second line is the subject,
// the rest the payload.
func exchange(t *testing.T, blocks []string, mark string) message {
	t.Helper()
	for _, b := range blocks {
		first, rest, _ := strings.Cut(b, "\n")
		if strings.HasPrefix(first, mark) {
			subject, data, _ := strings.Cut(rest, "\n")
			return message{subject: strings.TrimSpace(subject), data: strings.TrimSpace(data)}
		}
	}
	t.Fatalf("README's walkthrough has no %q block", mark)
	return message{}
}

// insertAfter inserts text after the first occurrence of anchor in path.
func insertAfter(t *testing.T, path, anchor, text string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, after, ok := strings.Cut(string(raw), anchor)
	if !ok {
		t.Fatalf("%s has no %q to insert after", path, anchor)
	}
	writeFile(t, path, before+anchor+text+after)
}

// copyModule copies the module's files (tracked or new, not ignored) into
// a temporary directory.
func copyModule(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("listing the module's files: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		raw, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name), string(raw))
	}
	return dir
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func goCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	run(t, cmd)
}

func run(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(fmt.Errorf("writing %s: %w", path, err))
	}
}
