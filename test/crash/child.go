package crash

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
	return buildPackage(ctx, "./cmd/jetfn", filepath.Join(dir, "jetfn"), extra...)
}

// buildPackage compiles the module's package pkg into bin.
func buildPackage(ctx context.Context, pkg, bin string, extra ...string) (string, error) {
	root, err := moduleRoot(ctx)
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

func moduleRoot(ctx context.Context) (string, error) {
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
}

func (e ChildEnv) list() []string {
	return []string{
		"NATS_URL=" + e.NATSURL,
		"MONGO_URI=" + e.MongoURI,
		"MONGO_DATABASE=" + e.MongoDatabase,
		"JETFN_MANIFEST=" + e.Manifest,
		"DRAIN_TIMEOUT=5s",
		"LOG_LEVEL=info",
		"LOG_FORMAT=json",
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
	}
}

// Child is one `jetfn run` process, or a remote function's. Its log goes
// to a file; the process is reaped by the goroutine Start launches, which
// Kill and Stop wait for.
type Child struct {
	cmd     *exec.Cmd
	log     *logWatch
	Started time.Time
	done    chan struct{}
	err     error // set before done closes
}

// StartChild runs `bin run` with env, appending its output to logPath.
func StartChild(bin string, env ChildEnv, logPath string) (*Child, error) {
	cmd := exec.Command(bin, append([]string{"run"}, env.Args...)...)
	cmd.Env = env.list()
	return startProcess(cmd, logPath, readyLine)
}

// startProcess starts cmd with its output appended to logPath; Ready waits
// for readyLine in that output.
func startProcess(cmd *exec.Cmd, logPath, readyLine string) (*Child, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	lw := &logWatch{w: f, readyLine: readyLine, ready: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = lw, lw
	c := &Child{cmd: cmd, log: lw, done: make(chan struct{})}
	c.Started = time.Now()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(cmd.Path), err)
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
		return fmt.Errorf("%s exited before it was ready: %v (see %s)", filepath.Base(c.cmd.Path), c.err, c.log.name())
	case <-ctx.Done():
		return fmt.Errorf("waiting for jetfn to be ready: %w", ctx.Err())
	}
}

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
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", filepath.Base(c.cmd.Path), stopTimeout)
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
