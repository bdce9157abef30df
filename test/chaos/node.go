package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
)

// natsReadyLine is what nats-server logs once it accepts clients.
const natsReadyLine = "Server is ready"

// nodeReadyTimeout bounds how long a node may take to accept clients; a
// restart on a store with thousands of messages replays them first.
const nodeReadyTimeout = time.Minute

// Node is one nats-server process of the cluster, with its own store
// directory, client, route and monitoring ports and a config file the
// harness writes. It can be SIGKILLed, paused with SIGSTOP, resumed and
// started again on the same config, so it rejoins with whatever its store
// kept.
type Node struct {
	Name    string
	bin     string
	dir     string
	client  int
	monitor int
	proc    *testkit.Child
	paused  bool
}

// nodeConfig is a node's nats-server.conf. sync is the jetstream block's
// sync_interval line, or empty for the server's default (2m).
const nodeConfig = `# Written by the chaos harness (test/chaos).
server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream {
  store_dir: %q
  %s
}
cluster {
  name: jetfn-chaos
  listen: 127.0.0.1:%d
  routes: [%s]
}
`

func (nd *Node) configPath() string { return filepath.Join(nd.dir, "nats-server.conf") }

func (nd *Node) writeConfig(route int, routes []string, sync string) error {
	if sync != "" {
		sync = "sync_interval: " + sync
	}
	text := fmt.Sprintf(nodeConfig, nd.Name, nd.client, nd.monitor, filepath.Join(nd.dir, "store"), sync,
		route, strings.Join(routes, ", "))
	if err := os.WriteFile(nd.configPath(), []byte(text), 0o644); err != nil {
		return fmt.Errorf("writing %s's config: %w", nd.Name, err)
	}
	return nil
}

// Start runs the node's process and waits until it accepts clients (not
// until JetStream is current: see Healthy).
func (nd *Node) Start(ctx context.Context) error {
	if nd.proc != nil {
		return fmt.Errorf("starting %s: it is running", nd.Name)
	}
	p, err := testkit.StartProcess(nd.bin, []string{"-c", nd.configPath()}, nil,
		filepath.Join(nd.dir, "nats-server.log"), natsReadyLine)
	if err != nil {
		return err
	}
	nd.proc = p
	ctx, cancel := context.WithTimeout(ctx, nodeReadyTimeout)
	defer cancel()
	return p.Ready(ctx)
}

// Kill is the power cut of the process: SIGKILL, no Raft step-down, no
// flush. The page cache survives it, as it does an OOM kill.
func (nd *Node) Kill() {
	if nd.proc == nil {
		return
	}
	nd.proc.Kill()
	nd.proc, nd.paused = nil, false
}

// Pause stops the process with SIGSTOP: its sockets stay open and its
// peers hear nothing, as when a hypervisor or a long GC stalls a machine.
func (nd *Node) Pause() error {
	if err := nd.proc.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pausing %s: %w", nd.Name, err)
	}
	nd.paused = true
	return nil
}

// Resume continues a paused process.
func (nd *Node) Resume() error {
	if err := nd.proc.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("resuming %s: %w", nd.Name, err)
	}
	nd.paused = false
	return nil
}

// Up reports whether the node's process runs (paused or not).
func (nd *Node) Up() bool { return nd.proc != nil }

// URL is the node's client URL.
func (nd *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", nd.client) }

// Healthy asks the node's /healthz, which answers 200 only once the node
// has JetStream enabled, knows the meta leader and has every stream and
// consumer it replicates current: the node is a full member again.
func (nd *Node) Healthy(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/healthz", nd.monitor), nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop ends the node at the end of a run: a paused node is resumed first
// so SIGTERM can reach it.
func (nd *Node) Stop() {
	if nd.proc == nil {
		return
	}
	if nd.paused {
		_ = nd.Resume()
	}
	_ = nd.proc.Stop() // it kills what does not stop in time
	nd.proc = nil
}
