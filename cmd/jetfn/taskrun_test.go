package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// stack is `go tool task run` (or another command that runs jetfn dev) in a
// process group of its own, with everything it printed.
type stack struct {
	cmd    *exec.Cmd
	ports  []int
	mu     sync.Mutex
	output bytes.Buffer
	exited chan struct{}
	err    error
}

// startStack starts name args in dir, with free ports for jetfn dev, and
// waits until jetfn prints "ready".
func startStack(t *testing.T, dir string, name string, args ...string) *stack {
	t.Helper()
	s := &stack{ports: []int{freePort(t), freePort(t)}, exited: make(chan struct{})}
	args = append(args, "--dir", filepath.Join(t.TempDir(), ".jetfn"),
		"--nats-port", strconv.Itoa(s.ports[0]), "--mongo-port", strconv.Itoa(s.ports[1]))
	s.cmd = exec.Command(name, args...)
	s.cmd.Dir = dir
	s.cmd.Env = append(os.Environ(), "LOG_LEVEL=warn")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as a shell puts a job in its own group
	// An *os.File, so Wait returns when the command exits even if a child
	// it left behind still holds the pipe.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			s.mu.Lock()
			s.output.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if sc.Text() == "ready" {
				close(ready)
			}
		}
	}()
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	select {
	case <-ready:
	case <-s.exited:
		t.Fatalf("%s exited before ready: %v\n%s", name, s.err, s.printed())
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s not ready after 2m:\n%s", name, s.printed())
	}
	return s
}

func (s *stack) printed() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output.String()
}

// wait returns the exit code once the command has exited.
func (s *stack) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after the signal:\n%s", s.printed())
	}
	var exit *exec.ExitError
	if errors.As(s.err, &exit) {
		return exit.ExitCode()
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	return 0
}

// portsFreed waits until nothing listens on the stack's ports.
func (s *stack) portsFreed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, port := range s.ports {
		for portFree(port) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("port %d still taken a minute later:\n%s", port, s.printed())
			}
			time.Sleep(50 * time.Millisecond) // polling the port, not waiting for an effect to happen by itself
		}
	}
}

// childOf is the pid of parent's only child, from /proc: each thread lists
// the children it started.
func childOf(t *testing.T, parent int) int {
	t.Helper()
	files, err := filepath.Glob("/proc/" + strconv.Itoa(parent) + "/task/*/children")
	if err != nil || len(files) == 0 {
		t.Skipf("reading a child's pid needs Linux /proc (%v)", err)
	}
	var kids []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		kids = append(kids, strings.Fields(string(raw))...)
	}
	if len(kids) != 1 {
		t.Fatalf("process %d has children %v, want one", parent, kids)
	}
	pid, err := strconv.Atoi(kids[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestTaskRunStops runs the README's `go tool task run` in a copy of the
// module and stops it as a user, a script and a supervisor would: each time
// jetfn drains, exits and frees its ports, and where a signal reaches it
// the command exits 0 without a task error.
func TestTaskRunStops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := runtimetest.CopyModule(t)
	inDir(t, dir, "go", "tool", "task", "build") // so each start below only links

	t.Run("Ctrl-C in a terminal", func(t *testing.T) {
		s := startStack(t, dir, "go", "tool", "task", "run", "--")
		if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT); err != nil { // the terminal signals the whole job
			t.Fatal(err)
		}
		code := s.wait(t)
		t.Logf("exit %d:\n%s", code, s.printed())
		if code != 0 || strings.Contains(s.printed(), "task: Failed") {
			t.Errorf("exit %d, want 0 and no task error", code)
		}
		s.portsFreed(t)
	})

	t.Run("SIGTERM to go tool jetfn dev alone", func(t *testing.T) {
		s := startStack(t, dir, "go", "tool", "jetfn", "dev")
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := s.wait(t); code != 0 {
			t.Errorf("exit %d, want 0:\n%s", code, s.printed())
		}
		s.portsFreed(t)
	})

	t.Run("a supervisor kills the task process", func(t *testing.T) {
		s := startStack(t, dir, "go", "tool", "task", "run", "--")
		task := childOf(t, s.cmd.Process.Pid) // go tool runs the task binary as its child
		if err := syscall.Kill(task, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		s.wait(t)
		s.portsFreed(t) // jetfn, left without its parent, drains and exits
	})
}
