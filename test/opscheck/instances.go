package opscheck

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
)

// Starting an instance is tried this often, a second apart, as a
// supervisor (systemd, Kubernetes) restarts a process that exits at once:
// `jetfn run` exits when NATS does not answer its first lookups.
const (
	startAttempts = 10
	startPause    = time.Second
	readyTimeout  = time.Minute
)

// instance is one `jetfn run --deployment` process. It is supervised: an
// exit the nemesis did not cause is recorded in the history and the
// process is started again, as a real supervisor would.
type instance struct {
	id      int
	bin     string
	env     testkit.ChildEnv
	logPath string
	hist    *History
	wg      *sync.WaitGroup

	mu     sync.Mutex
	proc   *testkit.Child
	want   bool
	paused bool
	closed bool // Stop ran: nothing starts it again
}

func newInstance(id int, bin, dir string, env testkit.ChildEnv, hist *History, wg *sync.WaitGroup) *instance {
	return &instance{id: id, bin: bin, env: env, hist: hist, wg: wg,
		logPath: filepath.Join(dir, fmt.Sprintf("jetfn-%d.log", id))}
}

func (in *instance) name() string { return fmt.Sprintf("jetfn-%d", in.id) }

// Start runs the process until it is ready, retrying starts that exit.
func (in *instance) Start(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.proc != nil {
		return nil
	}
	if in.closed {
		return errors.New(in.name() + " is stopped for good")
	}
	in.want = true
	var err error
	for range startAttempts {
		if err = in.startOnce(ctx); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		in.hist.Info(in.name(), "start failed, retrying: "+err.Error())
		select {
		case <-ctx.Done():
			return err
		case <-time.After(startPause):
		}
	}
	return fmt.Errorf("%s: %d starts: %w", in.name(), startAttempts, err)
}

// startOnce starts one process; in.mu is held.
func (in *instance) startOnce(ctx context.Context) error {
	p, err := testkit.StartChild(in.bin, in.env, in.logPath)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := p.Ready(rctx); err != nil {
		p.Kill()
		return err
	}
	in.proc, in.paused = p, false
	in.wg.Go(func() { in.supervise(ctx, p) })
	return nil
}

// supervise waits for p to exit; an exit nobody asked for is recorded and
// the instance started again.
func (in *instance) supervise(ctx context.Context, p *testkit.Child) {
	select {
	case <-ctx.Done():
		return
	case <-p.Exited():
	}
	in.mu.Lock()
	unexpected := in.want && in.proc == p
	if unexpected {
		in.proc = nil
	}
	in.mu.Unlock()
	if !unexpected {
		return
	}
	in.hist.Info(in.name(), "exited unexpectedly; restarting (see "+filepath.Base(in.logPath)+")")
	select {
	case <-ctx.Done():
		return
	case <-time.After(startPause):
	}
	if err := in.Start(ctx); err != nil {
		in.hist.Info(in.name(), "restart after an unexpected exit failed: "+err.Error())
	}
}

// Kill is SIGKILL; the instance stays down until Start.
func (in *instance) Kill() {
	in.mu.Lock()
	p := in.proc
	in.proc, in.want, in.paused = nil, false, false
	in.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Pause is SIGSTOP, Resume SIGCONT.
func (in *instance) Pause() error  { return in.signal(syscall.SIGSTOP, true) }
func (in *instance) Resume() error { return in.signal(syscall.SIGCONT, false) }

func (in *instance) signal(sig syscall.Signal, paused bool) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.proc == nil {
		return errors.New(in.name() + " is not running")
	}
	in.paused = paused
	return in.proc.Signal(sig)
}

// Up reports whether the process runs (paused or not).
func (in *instance) Up() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.proc != nil
}

// Stop drains the process at the end of a run (a paused one is resumed
// first, so SIGTERM reaches it).
func (in *instance) Stop() {
	in.mu.Lock()
	p, paused := in.proc, in.paused
	in.proc, in.want, in.closed = nil, false, true
	in.mu.Unlock()
	if p == nil {
		return
	}
	if paused {
		_ = p.Signal(syscall.SIGCONT)
	}
	_ = p.Stop()
}
