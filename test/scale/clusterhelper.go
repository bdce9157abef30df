package scale

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/test/testkit"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// clusterName is the name every node of a test cluster shares.
const clusterName = "jetfn-test"

// nodeReadyTimeout bounds how long one node may take to accept clients.
const nodeReadyTimeout = 10 * time.Second

// Cluster is an in-process nats-server cluster: every node has JetStream,
// its own store directory, a client port and a route port on loopback, and
// routes to every other node. A node can be stopped and started again on the
// same ports and store directory, so it rejoins with its data.
type Cluster struct {
	t     testing.TB
	nodes []*Node
	// admin is the user ConnectCluster connects as when the cluster has
	// users (StartSecuredCluster); empty otherwise.
	admin string
}

// Node is one server of a Cluster. Srv is nil while the node is stopped.
type Node struct {
	Name        string
	storeDir    string
	clientPort  int
	clusterPort int
	routes      []string
	users       []*server.User
	Srv         *server.Server
}

// StartCluster starts n nodes, waits until JetStream has a meta leader and
// every node is current, and stops them all when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return startCluster(t, n, nil)
}

// StartSecuredCluster is StartCluster with two users on every node: "admin"
// (password "admin"), allowed everything, and "jetfn" (password "jetfn")
// with exactly the given permissions, as `jetfn permissions` prints them.
func StartSecuredCluster(t testing.TB, n int, perms manifest.Permissions) *Cluster {
	t.Helper()
	users := []*server.User{
		{Username: "admin", Password: "admin"},
		{Username: "jetfn", Password: "jetfn", Permissions: serverPermissions(perms)},
	}
	c := startCluster(t, n, users)
	c.admin = "admin"
	return c
}

// serverPermissions turns generated permissions into nats-server's form.
func serverPermissions(p manifest.Permissions) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: p.Publish},
		Subscribe: &server.SubjectPermission{Allow: p.Subscribe},
	}
}

func startCluster(t testing.TB, n int, users []*server.User) *Cluster {
	t.Helper()
	ports, err := testkit.FreePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]))
	}
	for i := range n {
		c.nodes = append(c.nodes, &Node{
			Name:     fmt.Sprintf("n%d", i+1),
			storeDir: filepath.Join(t.TempDir(), "js"),
			// Clients on the first n ports, routes on the next n.
			clientPort: ports[i], clusterPort: ports[n+i], routes: routes, users: users,
		})
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			c.Stop(nd.Name)
		}
	})
	for _, nd := range c.nodes {
		if err := nd.start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitJetStream(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// options are built fresh for every start: NewServer keeps and changes the
// struct it is given.
func (nd *Node) options() *server.Options {
	return &server.Options{
		ServerName: nd.Name,
		Host:       "127.0.0.1",
		Port:       nd.clientPort,
		JetStream:  true,
		StoreDir:   nd.storeDir,
		Cluster:    server.ClusterOpts{Name: clusterName, Host: "127.0.0.1", Port: nd.clusterPort},
		Routes:     server.RoutesFromStr(strings.Join(nd.routes, ",")),
		NoSigs:     true,
		NoLog:      true,
		Users:      nd.users,
	}
}

func (nd *Node) start() error {
	ns, err := server.NewServer(nd.options())
	if err != nil {
		return fmt.Errorf("starting %s: %w", nd.Name, err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(nodeReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return fmt.Errorf("starting %s: not ready after %s", nd.Name, nodeReadyTimeout)
	}
	nd.Srv = ns
	return nil
}

// URL is the node's client URL.
func (nd *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", nd.clientPort) }

// URLs is every node's client URL, comma-separated, as NATS_URL takes them.
func (c *Cluster) URLs() string { return testkit.JoinURLs(c.nodes) }

// Node returns the node called name, or fails the test.
func (c *Cluster) Node(name string) *Node {
	for _, nd := range c.nodes {
		if nd.Name == name {
			return nd
		}
	}
	c.t.Fatalf("no node %q in the cluster", name)
	return nil
}

// Stop shuts the node down and waits until it has. Shutdown first steps down
// the Raft groups the node leads (server.Shutdown, stepdownRaftNodes), so
// this is a clean stop, not a power cut: the other nodes need no election
// timeout to notice. Stopping a stopped node does nothing.
func (c *Cluster) Stop(name string) {
	nd := c.Node(name)
	if nd.Srv == nil {
		return
	}
	nd.Srv.Shutdown()
	nd.Srv.WaitForShutdown()
	nd.Srv = nil
}

// Restart starts a stopped node again on its ports and store directory.
func (c *Cluster) Restart(name string) error {
	nd := c.Node(name)
	if nd.Srv != nil {
		return fmt.Errorf("restarting %s: it is running", name)
	}
	return nd.start()
}

// WaitJetStream waits until one running node is the JetStream meta leader
// and every running node is current with it, so an R3 asset can be placed.
func (c *Cluster) WaitJetStream(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !c.jetStreamReady() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the JetStream meta leader: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

func (c *Cluster) jetStreamReady() bool {
	leaders := 0
	for _, nd := range c.nodes {
		if nd.Srv == nil {
			continue
		}
		if !nd.Srv.JetStreamIsCurrent() {
			return false
		}
		if nd.Srv.JetStreamIsLeader() {
			leaders++
		}
	}
	return leaders == 1
}

// ConnectCluster connects to every node's URL with unlimited reconnects, as
// `jetfn run` does, and closes the connection when the test ends.
func (c *Cluster) ConnectCluster(t testing.TB, name string) *nats.Conn {
	t.Helper()
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}
	if c.admin != "" {
		opts = append(opts, nats.UserInfo(c.admin, c.admin))
	}
	nc, err := nats.Connect(c.URLs(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
