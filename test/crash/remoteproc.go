package crash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
)

// The remote function the remote points run: the Go example, built from
// this module like jetfn, as a micro service that upserts one document per
// input (keyed by Jetfn-Msg-Id) and replies with one output.
const (
	remotePackage    = "./examples/remote-go"
	remoteService    = "greeter"
	remoteFunction   = "remote-greet"
	remoteStream     = "GREETINGS"
	remoteInput      = "greet.requested"
	remoteOutput     = "greet.done"
	remoteCollection = "greetings"
)

// The remote function's consumer: a short ackWait and timeout, so a run
// recovers in seconds; the remote answers in milliseconds.
const (
	remoteAckWait   = 2 * time.Second
	remoteHeartbeat = time.Second
	remoteTimeout   = 2 * time.Second
)

// remoteManifestTemplate binds the remote function alone; the verbs are its
// consumer settings.
const remoteManifestTemplate = `# Written by the crash harness (test/crash) for one remote run.
deadLetter:
  stream: DEADLETTER
  subjectPrefix: deadletter
streams:
  - name: GREETINGS
    subjects: ["greet.>"]
    duplicates: 24h
  - name: DEADLETTER
    subjects: ["deadletter.>"]
    duplicates: 24h
functions:
  - name: remote-greet
    version: 1.0.0
    stream: GREETINGS
    subject: greet.requested
    ackWait: %s
    heartbeat: %s
    maxDeliver: 5
    backoff: [1s]
    concurrency: 4
    timeout: %s
    remote:
      subject: greeter.handle
    outputs:
      - subject: greet.done
        stream: GREETINGS
`

// prepareRemote writes a fresh remote manifest and picks a fresh database
// for one run.
func (h *Harness) prepareRemote(name string) error {
	h.nextRun(name)
	text := fmt.Sprintf(remoteManifestTemplate, remoteAckWait, remoteHeartbeat, remoteTimeout)
	if err := os.WriteFile(h.manPath, []byte(text), 0o644); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	return nil
}

// startRemote starts the remote function as a process that reaches NATS
// through its own proxy (so its reply can be held) and Mongo through the
// relay, with the run's database, and waits until its service answers a
// ping. The binary is built on the first call.
func (h *Harness) startRemote(ctx context.Context) error {
	if err := h.remoteSetup(ctx); err != nil {
		return err
	}
	if h.remote != nil {
		return fmt.Errorf("a remote is already running")
	}
	env := []string{
		"NATS_URL=" + h.remoteProxy.URL(),
		"MONGO_URI=" + h.stack.ChildMongoURI(),
		"MONGO_DATABASE=" + h.db,
		"PATH=" + os.Getenv("PATH"),
	}
	c, err := testkit.StartProcess(h.remoteBin, nil, env, h.logPath+".remote", "")
	if err != nil {
		return err
	}
	h.remote = c
	return h.awaitRemote(ctx)
}

// remoteSetup builds the remote and starts its proxy, once per harness.
func (h *Harness) remoteSetup(ctx context.Context) error {
	if h.remoteProxy != nil {
		return nil
	}
	bin, err := testkit.BuildPackage(ctx, remotePackage, filepath.Join(h.dir, "remote"), h.opts.BuildFlags...)
	if err != nil {
		return err
	}
	proxy, err := StartProxy(h.stack.NATSAddr(), remoteOutput, h.opts.Log)
	if err != nil {
		return err
	}
	h.remoteBin, h.remoteProxy = bin, proxy
	return nil
}

// awaitRemote waits until the remote's service answers $SRV.PING on the
// harness's own connection: it has subscribed, through its proxy.
func (h *Harness) awaitRemote(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return testkit.Poll(ctx, 20*time.Millisecond, "the remote's micro service", func(context.Context) bool {
		_, err := h.stack.nc.Request("$SRV.PING."+remoteService, nil, 500*time.Millisecond)
		return err == nil
	})
}

// killRemote SIGKILLs the remote and reaps it.
func (h *Harness) killRemote() { killProcess(&h.remote) }

// stopRemote stops the remote gracefully at the end of a run.
func (h *Harness) stopRemote() error { return stopProcess(&h.remote) }
