package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
)

// Cluster is three nats-server processes with routes between them.
type Cluster struct {
	Nodes []*Node
}

// StartCluster writes a config for each of n nodes under dir and starts
// them. sync is JetStream's sync_interval ("always", "10s"), or empty for
// the server's default.
func StartCluster(ctx context.Context, bin, dir string, n int, sync string) (*Cluster, error) {
	ports, err := testkit.FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	c := &Cluster{}
	for i := range n {
		nd := &Node{Name: fmt.Sprintf("n%d", i+1), bin: bin, dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			client: ports[i], monitor: ports[2*n+i]}
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			return nil, err
		}
		if err := nd.writeConfig(ports[n+i], routes, sync); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, nd)
	}
	for _, nd := range c.Nodes {
		if err := nd.Start(ctx); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// URLs is every node's client URL, comma-separated, as NATS_URL takes them.
func (c *Cluster) URLs() string { return testkit.JoinURLs(c.Nodes) }

// Node returns the node called name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, nd := range c.Nodes {
		if nd.Name == name {
			return nd
		}
	}
	return nil
}

// WaitHealthy waits until every node answers /healthz with 200.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return testkit.Poll(ctx, 100*time.Millisecond, "every node healthy", func(ctx context.Context) bool {
		for _, nd := range c.Nodes {
			if !nd.Healthy(ctx) {
				return false
			}
		}
		return true
	})
}

// Stop ends every node.
func (c *Cluster) Stop() {
	for _, nd := range c.Nodes {
		nd.Stop()
	}
}
