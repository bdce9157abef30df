package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// buildJetfn builds the real binary once per test run.
func buildJetfn(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "jetfn")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// devProcess is a running `jetfn dev`.
type devProcess struct {
	cmd      *exec.Cmd
	natsURL  string
	exitCode chan int
	// printed is what it printed to stdout up to "ready".
	printed []string
}

func startDev(t *testing.T, bin, dir string, natsPort, mongoPort int, extra ...string) *devProcess {
	t.Helper()
	return startDevWith(t, bin, dir, natsPort, mongoPort, []string{"LOG_LEVEL=warn"}, os.Stderr, extra...)
}

// startDevWith is startDev with env added to the process's environment
// and its log lines written to stderr.
func startDevWith(t *testing.T, bin, dir string, natsPort, mongoPort int, env []string, stderr io.Writer, extra ...string) *devProcess {
	t.Helper()
	args := append([]string{"dev", "--dir", dir, "--nats-port", strconv.Itoa(natsPort),
		"--mongo-port", strconv.Itoa(mongoPort), "--manifest", "../../manifests/local.yaml"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devProcess{cmd: cmd, exitCode: make(chan int, 1)}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_ = cmd.Wait()
		p.exitCode <- cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("jetfn dev exited before ready (code %d)", <-p.exitCode)
			}
			p.printed = append(p.printed, line)
			if v, found := strings.CutPrefix(line, "NATS_URL="); found {
				p.natsURL = v
			}
			if line == "ready" {
				go func() {
					for range lines { // keep draining stdout
					}
				}()
				return p
			}
		case <-deadline:
			t.Fatal("jetfn dev not ready after 60s")
		}
	}
}

// stop sends SIGTERM and returns the exit code and how long the drain took.
func (p *devProcess) stop(t *testing.T) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-p.exitCode:
		return code, time.Since(start)
	case <-time.After(60 * time.Second):
		t.Fatal("jetfn dev did not exit after SIGTERM")
		return 0, 0
	}
}

func publishWithID(t *testing.T, url, id string) (*jetstream.PubAck, uint64) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := js.Publish(ctx, "transcript.processed", []byte(`{}`), jetstream.WithMsgID(id))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "TRANSCRIPTION")
	if err != nil {
		t.Fatal(err)
	}
	return ack, s.CachedInfo().State.Msgs
}

// serviceMetadata is the micro metadata a function registered.
func serviceMetadata(t *testing.T, url, service string) map[string]string {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reply, err := nc.Request("$SRV.INFO."+service, nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(reply.Data, &info); err != nil {
		t.Fatal(err)
	}
	return info.Metadata
}

// printedLine is the first line p printed that starts with prefix.
func printedLine(t *testing.T, p *devProcess, prefix string) string {
	t.Helper()
	for _, line := range p.printed {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	t.Fatalf("jetfn dev printed no line starting %q:\n%s", prefix, strings.Join(p.printed, "\n"))
	return ""
}

// TestDevRestartKeepsData is the field report's lesson about a NATS
// container without a volume: after SIGTERM and a new `jetfn dev` on the same
// dir, the stream still holds its messages and still remembers message IDs.
// Each start says whether it reuses the dir and what the dir holds, and a
// second stack on a dir in use is refused.
func TestDevRestartKeepsData(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildJetfn(t)
	dir := filepath.Join(t.TempDir(), ".jetfn")
	natsPort, mongoPort := freePort(t), freePort(t)

	first := startDev(t, bin, dir, natsPort, mongoPort)
	if line := printedLine(t, first, "starting fresh"); line != "starting fresh in "+dir+"/ (nothing there yet)" {
		t.Errorf("first start printed %q", line)
	}
	if line := printedLine(t, first, "CONSOLE="); !strings.HasPrefix(line, "CONSOLE=http://127.0.0.1:") || !strings.HasSuffix(line, "/") {
		t.Errorf("the console's address printed as %q", line)
	}
	if hb := serviceMetadata(t, first.natsURL, "publish-recording-event")["heartbeat"]; hb != "3.333s" {
		t.Errorf("micro metadata heartbeat %q, want 3.333s (ackWait 10s / 3, to the millisecond)", hb)
	}
	ack, before := publishWithID(t, first.natsURL, "restart-check")
	if ack.Duplicate || before != 1 {
		t.Fatalf("first publish: duplicate %v, stream holds %d; want a new message", ack.Duplicate, before)
	}
	second := exec.Command(bin, "dev", "--dir", dir, "--nats-port", strconv.Itoa(freePort(t)), "--mongo-port", strconv.Itoa(freePort(t)))
	out, err := second.CombinedOutput()
	var exit *exec.ExitError
	if want := fmt.Sprintf("data directory in use by another jetfn dev: pid %d holds %s/dev.lock", first.cmd.Process.Pid, dir); !errors.As(err, &exit) ||
		exit.ExitCode() != 2 || !strings.Contains(string(out), want) {
		t.Fatalf("a second dev on the same dir: %v\n%s\nwant exit 2 and %q", err, out, want)
	}
	code, took := first.stop(t)
	t.Logf("SIGTERM: exit %d after %s", code, took)
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}

	again := startDev(t, bin, dir, natsPort, mongoPort)
	reuse := printedLine(t, again, "reusing ")
	t.Log(reuse)
	// The manifest's 5 streams and publish-recording-event's keyed stream;
	// summarize-session's and report-summaries' consumers, and
	// publish-recording-event's router and 16 partitions. The message
	// published above, report-summaries' schedule, and a tick if a minute
	// passed.
	counts := regexp.MustCompile(`\): 6 streams with \d+ messages, 19 consumers, `)
	if !strings.HasPrefix(reuse, "reusing "+dir+"/ (created ") || !counts.MatchString(reuse) {
		t.Errorf("restart printed %q, want it to reuse the dir and count 6 streams and 19 consumers", reuse)
	}
	ack, after := publishWithID(t, again.natsURL, "restart-check")
	if !ack.Duplicate || after != before {
		t.Fatalf("after restart: duplicate %v, stream holds %d; want the ID remembered and %d messages", ack.Duplicate, after, before)
	}

	taken := exec.Command(bin, "dev", "--dir", t.TempDir(), "--nats-port", strconv.Itoa(natsPort), "--mongo-port", strconv.Itoa(freePort(t)))
	out, err = taken.CombinedOutput()
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "port is taken") {
		t.Fatalf("dev on a taken port: %v\n%s\nwant exit 2 naming the port", err, out)
	}
	if code, _ := again.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}

	fresh := startDev(t, bin, dir, natsPort, mongoPort, "--fresh")
	if line := printedLine(t, fresh, "starting fresh"); line != "starting fresh: --fresh wiped "+dir+"/" {
		t.Errorf("--fresh printed %q", line)
	}
	if ack, n := publishWithID(t, fresh.natsURL, "restart-check"); ack.Duplicate || n != 1 {
		t.Fatalf("after --fresh: duplicate %v, %d messages; want an empty stream", ack.Duplicate, n)
	}
	fresh.stop(t)
}
