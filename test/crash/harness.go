package crash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/test/testkit"
)

// Options configure a Harness.
type Options struct {
	// Bin is a jetfn binary already built with Build; empty builds one.
	Bin string
	// Dir holds the servers' data, manifests and child logs; empty makes a
	// temporary directory that Close removes.
	Dir string
	// Quiet is summarize-session's quiet period (config.quiet).
	Quiet time.Duration
	// Log receives the harness's progress.
	Log *slog.Logger
	// BuildFlags are extra `go build` flags for the child binary.
	BuildFlags []string
}

// Harness owns one embedded stack, one proxy in front of its nats-server,
// and at most one `jetfn run` child at a time.
type Harness struct {
	opts    Options
	bin     string
	dir     string
	ownDir  bool
	stack   *Stack
	proxy   *Proxy
	child   *testkit.Child
	runs    int
	manPath string
	logPath string
	db      string
	args    []string

	// The remote points' remote function: its binary, the proxy between
	// it and NATS, and the running process. Set up on first use.
	remoteBin   string
	remoteProxy *Proxy
	remote      *testkit.Child

	// The ordered rows' recorder (a remote function of the harness's own)
	// and their second `jetfn run` instance.
	recorderBin string
	recorder    *testkit.Child
	peer        *testkit.Child
}

// New builds the binary (unless Options.Bin is set) and starts the stack
// and the proxy.
func New(ctx context.Context, opts Options) (*Harness, error) {
	if opts.Quiet <= 0 {
		return nil, fmt.Errorf("crash harness: quiet %s is not positive", opts.Quiet)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	h := &Harness{opts: opts, dir: opts.Dir}
	if h.dir == "" {
		dir, err := os.MkdirTemp("", "jetfn-crash-")
		if err != nil {
			return nil, err
		}
		h.dir, h.ownDir = dir, true
	}
	if err := h.start(ctx); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *Harness) start(ctx context.Context) error {
	h.bin = h.opts.Bin
	if h.bin == "" {
		bin, err := testkit.Build(ctx, h.dir, h.opts.BuildFlags...)
		if err != nil {
			return err
		}
		h.bin = bin
	}
	stack, err := StartStack(h.dir)
	if err != nil {
		return err
	}
	h.stack = stack
	proxy, err := StartProxy(stack.NATSAddr(), events.TranscriptProcessedSubject, h.opts.Log)
	if err != nil {
		return err
	}
	h.proxy = proxy
	return nil
}

// Close stops the child and the remote, their proxies and the stack, and
// removes a temporary directory.
func (h *Harness) Close() {
	h.killChild()
	killProcess(&h.peer)
	h.killRemote()
	killProcess(&h.recorder)
	if h.proxy != nil {
		h.proxy.Close()
	}
	if h.remoteProxy != nil {
		h.remoteProxy.Close()
	}
	if h.stack != nil {
		h.stack.Close()
	}
	if h.ownDir {
		_ = os.RemoveAll(h.dir)
	}
}

// prepare writes a fresh manifest with local.yaml's consumer settings and
// picks a fresh database for one run.
func (h *Harness) prepare(name string, window time.Duration) error {
	return h.prepareManifest(name, manifestParams{window: window, quiet: h.opts.Quiet, consumer: localConsumer})
}

// prepareManifest writes m as a fresh manifest and picks a fresh database
// for one run.
func (h *Harness) prepareManifest(name string, m manifestParams) error {
	h.nextRun(name)
	if m.window < dayWindow {
		// The runtime refuses a window shorter than twice the redelivery
		// horizon; the short-window control needs exactly that.
		h.args = []string{"--allow-short-window"}
	}
	return writeManifest(h.manPath, m)
}

// nextRun names the next run's manifest, child log and database.
func (h *Harness) nextRun(name string) {
	h.runs++
	base := fmt.Sprintf("%03d-%s", h.runs, strings.ReplaceAll(name, "/", "_"))
	h.manPath = filepath.Join(h.dir, "manifest-"+base+".yaml")
	h.logPath = filepath.Join(h.dir, "jetfn-"+base+".log")
	h.db = fmt.Sprintf("crash_%03d", h.runs)
	h.args = nil
}

// startChild starts `jetfn run` through the proxy, which passes everything
// again, and waits until its functions are bound.
func (h *Harness) startChild(ctx context.Context) (time.Time, error) {
	if h.child != nil {
		return time.Time{}, errors.New("a child is already running")
	}
	h.proxy.Reset()
	c, err := testkit.StartChild(h.bin, testkit.ChildEnv{
		NATSURL: h.proxy.URL(), MongoURI: h.stack.ChildMongoURI(), MongoDatabase: h.db, Manifest: h.manPath, Args: h.args,
	}, h.logPath)
	if err != nil {
		return time.Time{}, err
	}
	h.child = c
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Ready(readyCtx); err != nil {
		return c.Started, err
	}
	return c.Started, nil
}

// startDayRun prepares a run with the production duplicate window and
// starts the child, for the runs that publish many sessions at once (the
// batches, careless-publisher). It returns the transcription stream's next
// sequence once the child is bound: where the run's own messages begin.
func (h *Harness) startDayRun(ctx context.Context, name string) (uint64, error) {
	if err := h.prepare(name, dayWindow); err != nil {
		return 0, err
	}
	if _, err := h.startChild(ctx); err != nil {
		return 0, err
	}
	return nextSeq(ctx, h.stack.js, transcriptionStream)
}

// killChild SIGKILLs the child and reaps it.
func (h *Harness) killChild() { killProcess(&h.child) }

// stopChild stops the child gracefully at the end of a run.
func (h *Harness) stopChild() error { return stopProcess(&h.child) }

// killProcess SIGKILLs *p, reaps it and clears *p, so that the next start
// and Close find nothing running. A nil *p is already gone. The harness
// keeps the child and the remote this way.
func killProcess(p **testkit.Child) {
	if *p != nil {
		(*p).Kill()
		*p = nil
	}
}

// stopProcess stops *p gracefully and clears *p, as killProcess does.
func stopProcess(p **testkit.Child) error {
	if *p == nil {
		return nil
	}
	err := (*p).Stop()
	*p = nil
	return err
}

// stopChildAfter stops the child at the end of a run and returns the run's
// error, or the stop's if the run had none.
func (h *Harness) stopChildAfter(err error) error {
	if stopErr := h.stopChild(); err == nil {
		return stopErr
	}
	return err
}
