package remotenode

import (
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/test/crash"
)

// stack is the test's world: nats-server; FerretDB, which the Node remote
// reaches through a relay so an outage cuts its connections at once; the
// Node remote; and jetfn's runtime, which reaches NATS through a proxy
// that can drop its acks.
type stack struct {
	ns         *server.Server
	nc         *nats.Conn
	js         jetstream.JetStream
	mongoDir   string
	mongoAddr  string
	mongo      *devstack.Mongo
	relay      *crash.Relay
	db         *mongo.Database
	jetfnProxy *crash.Proxy
}

func startStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{ns: runtimetest.StartNATS(t), mongoDir: t.TempDir(), mongoAddr: "127.0.0.1:0"}
	s.startMongo(t)
	t.Cleanup(func() { s.mongo.Stop() })
	relay, err := crash.StartRelay(s.mongoAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)
	s.relay = relay
	s.db = runtimetest.ConnectMongo(t, s.mongo.URI).Database("remote_node")
	s.nc = runtimetest.Connect(t, s.ns.ClientURL())
	if s.js, err = jetstream.New(s.nc); err != nil {
		t.Fatal(err)
	}
	startNodeRemote(t, s.ns.ClientURL(), "mongodb://"+relay.Addr()+"/", s.db.Name())
	proxy, err := crash.StartProxy(strings.TrimPrefix(s.ns.ClientURL(), "nats://"), outputSubj, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	s.jetfnProxy = proxy
	startRuntime(t, proxy.URL())
	return s
}

// startMongo starts FerretDB on the stack's address and data directory:
// the first time on a free port, then on the same one again.
func (s *stack) startMongo(t *testing.T) {
	t.Helper()
	m, err := devstack.StartMongo(s.mongoAddr, s.mongoDir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(m.URI)
	if err != nil {
		t.Fatal(err)
	}
	s.mongo, s.mongoAddr = m, u.Host
}

// stopMongo stops FerretDB and cuts the remote's connections, which
// FerretDB would otherwise serve for a few seconds more.
func (s *stack) stopMongo(t *testing.T) {
	t.Helper()
	s.relay.Cut()
	s.mongo.Stop()
	s.relay.Cut()
}

// errorReplies records every micro error reply on the server until the
// test ends, as "<code> Retry-After <value>"; the remote's replies go to
// jetfn's inbox, which the test's connection can see too.
func (s *stack) errorReplies(t *testing.T) func() []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	sub, err := s.nc.Subscribe("_INBOX.>", func(m *nats.Msg) {
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, code+" Retry-After "+m.Header.Get("Retry-After"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// startRuntime runs jetfn's runtime with the test manifest until the test
// ends; remote-greet is in no registry, so no compiled-in functions.
func startRuntime(t *testing.T, natsURL string) {
	t.Helper()
	m, err := manifest.Parse([]byte(testManifest))
	if err != nil {
		t.Fatal(err)
	}
	nc := runtimetest.Connect(t, natsURL)
	rt, err := runtime.New(nc, m, nil, runtime.WithDrainTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
}

// requireNode skips when this machine cannot run the example; CI installs
// its packages (.ci/run: npm ci --prefix examples/remote-node), so it never
// skips there.
func requireNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: install Node.js 20.19 or later to run the Node remote example")
	}
	if _, err := os.Stat("node_modules"); err != nil {
		t.Skip("examples/remote-node/node_modules is missing: run `npm ci --prefix examples/remote-node`")
	}
}

// startNodeRemote runs `node index.js` until the test ends and waits until
// its micro service answers a ping. At the end it sends SIGTERM and wants
// a clean exit: the example drains its requests in flight.
func startNodeRemote(t *testing.T, natsURL, mongoURI, database string) {
	t.Helper()
	var out runtimetest.LogBuffer
	cmd := exec.Command("node", "index.js")
	cmd.Env = append(os.Environ(), "NATS_URL="+natsURL, "MONGO_URI="+mongoURI, "MONGO_DATABASE="+database)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("node remote exited with %v after SIGTERM; its output:\n%s", err, out.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("node remote still running 10s after SIGTERM; its output:\n%s", out.String())
		}
	})
	nc := runtimetest.Connect(t, natsURL)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := nc.Request("$SRV.PING.greeter", nil, 200*time.Millisecond)
		if err == nil {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("node remote exited before it answered a ping: %v; its output:\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node remote did not answer $SRV.PING.greeter within 30s (%v); its output:\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
