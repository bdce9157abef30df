package opscheck

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/test/crash"
	"github.com/jetfn/jetfn/test/testkit"
)

// remoteService is the micro service name of examples/remote-go.
const remoteService = "greeter"

// remoteProc is the remote function's process: examples/remote-go, which
// upserts one greeting per Jetfn-Msg-Id and replies with one greet.done
// output keyed by it. It reaches each NATS node through a crash.Proxy of
// its own, so its replies can be held (a one-way partition) while the
// requests still reach it.
type remoteProc struct {
	bin     string
	env     []string
	logPath string
	proxies []*crash.Proxy
	proc    *testkit.Child
	held    bool // Partition ran, Heal not yet
}

func newRemote(bin, dir string, addrs []string, mongoURI, db string, log *slog.Logger) (*remoteProc, error) {
	r := &remoteProc{bin: bin, logPath: filepath.Join(dir, "remote.log")}
	var urls []string
	for _, a := range addrs {
		p, err := crash.StartProxy(a, "greet.done", log)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.proxies = append(r.proxies, p)
		urls = append(urls, p.URL())
	}
	r.env = []string{"NATS_URL=" + strings.Join(urls, ","), "MONGO_URI=" + mongoURI,
		"MONGO_DATABASE=" + db, "PATH=" + os.Getenv("PATH")}
	return r, nil
}

// Start runs the process and waits until its service answers a ping on nc.
func (r *remoteProc) Start(ctx context.Context, nc *nats.Conn) error {
	if r.proc != nil {
		return errors.New("starting the remote: it is running")
	}
	p, err := testkit.StartProcess(r.bin, nil, r.env, r.logPath, "")
	if err != nil {
		return err
	}
	r.proc = p
	return r.ready(ctx, nc)
}

// ready waits until the service answers a ping on nc.
func (r *remoteProc) ready(ctx context.Context, nc *nats.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return testkit.Poll(ctx, 50*time.Millisecond, "the remote's micro service", func(context.Context) bool {
		_, err := nc.Request("$SRV.PING."+remoteService, nil, 500*time.Millisecond)
		return err == nil
	})
}

// Up reports whether the process runs.
func (r *remoteProc) Up() bool { return r.proc != nil }

// Kill is SIGKILL.
func (r *remoteProc) Kill() {
	if r.proc != nil {
		r.proc.Kill()
		r.proc = nil
	}
}

// Partition holds everything the remote sends from now on (its replies
// among them) on every open connection; requests still reach it, so it
// keeps storing documents whose replies jetfn never gets.
func (r *remoteProc) Partition() {
	r.held = true
	for _, p := range r.proxies {
		p.Freeze()
	}
}

// Heal closes the held connections; the remote reconnects through the
// proxies, which pass everything on new connections. Without a partition
// it does nothing.
func (r *remoteProc) Heal() {
	if !r.held {
		return
	}
	r.held = false
	for _, p := range r.proxies {
		p.Cut()
	}
}

// Close stops the process and the proxies.
func (r *remoteProc) Close() {
	if r.proc != nil {
		_ = r.proc.Stop()
		r.proc = nil
	}
	for _, p := range r.proxies {
		p.Close()
	}
}
