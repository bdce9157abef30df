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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// Each README block says where it goes in the paragraph before it: a
// file's path alone ("`functions/greet/greet.go`:") is a new file; otherwise
// the paragraph names the file to add the block to (and, for the registry,
// the package to import).
const (
	registryLabel = "`functions/registry.go`"
	streamsLabel  = "under `streams:`"
	functionLabel = "under `functions:`"
)

func TestReadmeAddingAFunction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a copy of the module")
	}
	root := runtimetest.ModuleRoot(t)
	blocks := readmeBlocks(t, filepath.Join(root, "README.md"), "## Adding a function")
	dir := runtimetest.CopyModule(t)
	apply(t, dir, blocks)

	goCmd(t, dir, "vet", "./functions/...")
	goCmd(t, dir, "test", "-count=1", "./functions/...")
	bin := filepath.Join(t.TempDir(), "jetfn")
	goCmd(t, dir, "build", "-o", bin, "./cmd/jetfn")
	manifestPath := filepath.Join(dir, "manifests", "local.yaml")
	run(t, exec.Command(bin, "check", "--manifest", manifestPath))

	send, expect := exchange(t, blocks)
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
			manifest, _ := os.ReadFile(manifestPath)
			t.Logf("jetfn run:\n%s\nmanifest:\n%s", logs.String(), manifest)
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

// block is one fenced code block and the line that introduces it.
type block struct{ label, text string }

// readmeBlocks returns the fenced code blocks of one README section.
func readmeBlocks(t *testing.T, path, heading string) []block {
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
	var blocks []block
	var cur, paragraph []string
	label, inBlock, ended := "", false, false
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```") && !inBlock:
			inBlock, cur = true, nil
			label, paragraph, ended = strings.Join(paragraph, " "), nil, false
		case strings.HasPrefix(line, "```"):
			inBlock = false
			blocks = append(blocks, block{label: label, text: strings.Join(cur, "\n") + "\n"})
		case inBlock:
			cur = append(cur, line)
		case strings.TrimSpace(line) == "":
			ended = true // the paragraph stays the label of a block after it
		default:
			if ended {
				paragraph, ended = nil, false
			}
			paragraph = append(paragraph, strings.TrimSpace(line))
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("README section %q has no code blocks", heading)
	}
	return blocks
}

// apply writes every block where its label says.
func apply(t *testing.T, dir string, blocks []block) {
	t.Helper()
	manifestPath := filepath.Join(dir, "manifests", "local.yaml")
	for _, b := range blocks {
		switch {
		case strings.HasPrefix(b.label, "`") && strings.HasSuffix(b.label, "`:"):
			path := filepath.Join(dir, strings.Trim(b.label, "`:"))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, b.text)
		case strings.Contains(b.label, registryLabel):
			registry := filepath.Join(dir, "functions", "registry.go")
			insertAfter(t, registry, "return []jetfn.Function{\n", b.text)
			_, pkg, _ := strings.Cut(b.label, "import ")
			insertAfter(t, registry, "import (\n", "\t\""+strings.Trim(strings.Fields(pkg)[0], "`):")+"\"\n")
		case strings.Contains(b.label, streamsLabel):
			insertAfter(t, manifestPath, "\nstreams:\n", b.text)
		case strings.Contains(b.label, functionLabel):
			insertAfter(t, manifestPath, "\nfunctions:\n", b.text)
		case strings.Contains(b.text, "nats pub"):
			// the commands a reader types; exchange reads them
		default:
			t.Fatalf("README block after %q says nowhere to go", b.label)
		}
	}
}

// exchange finds, in the README's shell lines, the message it publishes
// (`nats pub SUBJECT 'DATA'`) and the output it shows
// (`nats stream get … --last-for SUBJECT   # DATA`).
func exchange(t *testing.T, blocks []block) (send, expect message) {
	t.Helper()
	for _, b := range blocks {
		for _, line := range strings.Split(b.text, "\n") {
			fields := strings.Fields(line)
			switch {
			case slices.Contains(fields, "pub") && len(fields) >= 2:
				i := slices.Index(fields, "pub")
				_, data, _ := strings.Cut(line, "'")
				send = message{subject: fields[i+1], data: strings.TrimSuffix(strings.TrimSpace(data), "'")}
			case slices.Contains(fields, "--last-for"):
				i := slices.Index(fields, "--last-for")
				_, data, _ := strings.Cut(line, "# ")
				expect = message{subject: fields[i+1], data: strings.TrimSpace(data)}
			}
		}
	}
	if send.subject == "" || expect.subject == "" {
		t.Fatalf("README's walkthrough shows no `nats pub` (%+v) or no `--last-for` output (%+v)", send, expect)
	}
	return send, expect
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
