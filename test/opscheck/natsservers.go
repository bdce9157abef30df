package opscheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jetfn/jetfn/test/chaos"
	"github.com/jetfn/jetfn/test/testkit"
)

// natsNode is one nats-server process the nemesis can kill, pause and
// start again on the same store.
type natsNode interface {
	name() string
	Kill()
	Start(ctx context.Context) error
	Pause() error
	Resume() error
	Up() bool
	Stop()
}

// natsServers is the NATS side of the system: one process (the short run)
// or test/chaos's three-node cluster (R3 streams).
type natsServers struct {
	nodes []natsNode
	urls  string
	stop  func()
	// healthy waits until every node is a full member again.
	healthy func(ctx context.Context) error
}

// startNATS builds nothing: bin is the pinned nats-server binary. n is 1 or
// 3.
func startNATS(ctx context.Context, bin, dir string, n int) (*natsServers, error) {
	if n == 1 {
		nd, err := startSingle(ctx, bin, filepath.Join(dir, "nats"))
		if err != nil {
			return nil, err
		}
		return &natsServers{nodes: []natsNode{nd}, urls: nd.url(), stop: nd.Stop,
			healthy: func(context.Context) error { return nil }}, nil
	}
	c, err := chaos.StartCluster(ctx, bin, dir, n, "")
	if err != nil {
		return nil, err
	}
	s := &natsServers{urls: c.URLs(), stop: c.Stop, healthy: c.WaitHealthy}
	for _, nd := range c.Nodes {
		s.nodes = append(s.nodes, clusterNode{nd})
	}
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.WaitHealthy(wait); err != nil {
		c.Stop()
		return nil, err
	}
	return s, nil
}

// clusterNode gives chaos.Node the natsNode interface.
type clusterNode struct{ *chaos.Node }

func (c clusterNode) name() string { return c.Name }

// singleNode is one nats-server process without a cluster block.
type singleNode struct {
	bin, dir    string
	port, mport int
	proc        *testkit.Child
	paused      bool
}

const singleConfig = `# Written by opscheck (test/opscheck).
server_name: opscheck
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream {
  store_dir: %q
}
`

func startSingle(ctx context.Context, bin, dir string) (*singleNode, error) {
	ports, err := testkit.FreePorts(2)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	nd := &singleNode{bin: bin, dir: dir, port: ports[0], mport: ports[1]}
	text := fmt.Sprintf(singleConfig, nd.port, nd.mport, filepath.Join(dir, "store"))
	if err := os.WriteFile(nd.config(), []byte(text), 0o644); err != nil {
		return nil, err
	}
	return nd, nd.Start(ctx)
}

func (nd *singleNode) config() string { return filepath.Join(nd.dir, "nats-server.conf") }
func (nd *singleNode) name() string   { return "nats" }
func (nd *singleNode) url() string    { return fmt.Sprintf("nats://127.0.0.1:%d", nd.port) }
func (nd *singleNode) Up() bool       { return nd.proc != nil }

// Start runs the process and waits until it accepts clients.
func (nd *singleNode) Start(ctx context.Context) error {
	if nd.proc != nil {
		return fmt.Errorf("starting nats-server: it is running")
	}
	p, err := testkit.StartProcess(nd.bin, []string{"-c", nd.config()}, nil,
		filepath.Join(nd.dir, "nats-server.log"), "Server is ready")
	if err != nil {
		return err
	}
	nd.proc = p
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return p.Ready(ctx)
}

// Kill is SIGKILL: no flush, no clean shutdown.
func (nd *singleNode) Kill() {
	if nd.proc != nil {
		nd.proc.Kill()
		nd.proc, nd.paused = nil, false
	}
}

func (nd *singleNode) Pause() error {
	if nd.proc == nil {
		return fmt.Errorf("pausing nats-server: not running")
	}
	nd.paused = true
	return nd.proc.Signal(syscall.SIGSTOP)
}

func (nd *singleNode) Resume() error {
	if nd.proc == nil {
		return fmt.Errorf("resuming nats-server: not running")
	}
	nd.paused = false
	return nd.proc.Signal(syscall.SIGCONT)
}

// Stop ends the process at the end of a run.
func (nd *singleNode) Stop() {
	if nd.proc == nil {
		return
	}
	if nd.paused {
		_ = nd.Resume()
	}
	_ = nd.proc.Stop()
	nd.proc = nil
}

// names lists the nodes, for the history.
func (s *natsServers) names() string {
	var out []string
	for _, nd := range s.nodes {
		out = append(out, nd.name())
	}
	return strings.Join(out, ",")
}
