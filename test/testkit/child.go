package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readyLine is what `jetfn run` logs once every function is bound.
const readyLine = `"msg":"runtime ready"`

// stopTimeout bounds a graceful stop before the child is killed.
const stopTimeout = 15 * time.Second

// Build compiles ./cmd/jetfn of the module that holds this package into
// dir/jetfn, the binary every child runs. extra are more `go build` flags.
func Build(ctx context.Context, dir string, extra ...string) (string, error) {
	return BuildPackage(ctx, "./cmd/jetfn", filepath.Join(dir, "jetfn"), extra...)
}

// BuildPackage compiles pkg (a path inside this module, or a package of a
// module it requires, such as github.com/nats-io/nats-server/v2, at the
// pinned version) into the binary bin.
func BuildPackage(ctx context.Context, pkg, bin string, extra ...string) (string, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	args := append([]string{"build", "-o", bin}, extra...)
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// ModuleRoot is the directory of the go.mod that holds this package.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("finding the module root: not inside a module")
	}
	return filepath.Dir(gomod), nil
}

// ChildEnv is what `jetfn run` reads from its environment.
type ChildEnv struct {
	NATSURL, MongoURI, MongoDatabase, Manifest string
	// Args follow `run`.
	Args []string
	// Extra are more KEY=value entries (METRICS_ADDR, say); a repeated key
	// takes its last value.
	Extra []string
}

// Environ is the environment list a child process gets.
func (e ChildEnv) Environ() []string {
	return append([]string{
		"NATS_URL=" + e.NATSURL,
		"MONGO_URI=" + e.MongoURI,
		"MONGO_DATABASE=" + e.MongoDatabase,
		"JETFN_MANIFEST=" + e.Manifest,
		"DRAIN_TIMEOUT=5s",
		"LOG_LEVEL=info",
		"LOG_FORMAT=json",
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
	}, e.Extra...)
}

// Child is one child process (a `jetfn run`, a nats-server, a remote
// function). Its output goes to a file; the process is reaped by the
// goroutine StartProcess launches, which Kill and Stop wait for.
type Child struct {
	cmd     *exec.Cmd
	log     *logWatch
	Started time.Time
	done    chan struct{}
	err     error // set before done closes
}

// StartChild runs `bin run` with env, appending its output to logPath;
// Ready waits for the runtime's ready line.
func StartChild(bin string, env ChildEnv, logPath string) (*Child, error) {
	return StartProcess(bin, append([]string{"run"}, env.Args...), env.Environ(), logPath, readyLine)
}

// StartProcess runs bin with args and env, appending its output to
// logPath; Ready waits until a line of it contains ready (any first line
// when ready is empty).
func StartProcess(bin string, args, env []string, logPath, ready string) (*Child, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	lw := &logWatch{w: f, readyLine: ready, ready: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = procAttr()
	cmd.Stdout, cmd.Stderr = lw, lw
	c := &Child{cmd: cmd, log: lw, done: make(chan struct{})}
	c.Started = time.Now()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(bin), err)
	}
	go func() {
		c.err = cmd.Wait() // also waits for the copy into lw
		_ = f.Close()
		close(c.done)
	}()
	return c, nil
}

// Ready waits until the child has bound its functions, or has exited.
func (c *Child) Ready(ctx context.Context) error {
	select {
	case <-c.log.ready:
		return nil
	case <-c.done:
		return fmt.Errorf("%s exited before it was ready: %v (see %s); its last lines:\n%s", c.name(), c.err, c.log.name(), lastLines(c.log.name(), 10))
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s to be ready: %w", c.name(), ctx.Err())
	}
}

func (c *Child) name() string { return filepath.Base(c.cmd.Path) }

// Signal sends sig to the process: SIGSTOP and SIGCONT pause and resume
// it, as a hypervisor or a debugger would.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Exited is closed once the process has exited and been reaped.
func (c *Child) Exited() <-chan struct{} { return c.done }

// Kill sends SIGKILL, the stop with no cleanup, and reaps the process.
func (c *Child) Kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// Stop asks the child to drain with SIGTERM, and kills it if it has not
// exited after stopTimeout.
func (c *Child) Stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return c.err
	case <-time.After(stopTimeout):
		c.Kill()
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", c.name(), stopTimeout)
	}
}

// logWatch writes the child's output to its file and closes ready at the
// ready line.
type logWatch struct {
	w         *os.File
	readyLine string
	mu        sync.Mutex
	partial   []byte
	ready     chan struct{}
	isReady   bool
}

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if !l.isReady && strings.Contains(line, l.readyLine) {
			l.isReady = true
			close(l.ready)
		}
	}
	return l.w.Write(p)
}

func (l *logWatch) name() string { return l.w.Name() }

// lastLines returns the file's last n lines, so a child that died before
// it was ready explains itself in the test's own output (CI keeps no files).
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
