package crash

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/test/testkit"
)

// Stack is the harness's embedded nats-server and Mongo-compatible server,
// plus its own client connections to both. It outlives every child, and it
// can restart either server on the same port and data directory.
type Stack struct {
	dir       string
	natsPort  int
	ns        *server.Server
	mongo     *devstack.Mongo
	mongoAddr string
	relay     *Relay

	nc *nats.Conn
	js jetstream.JetStream
	mc *mongo.Client
}

// StartStack starts both servers with their data under dir and connects.
func StartStack(dir string) (*Stack, error) {
	s := &Stack{dir: dir}
	if err := s.startNATS(-1); err != nil {
		return nil, err
	}
	s.natsPort = s.ns.Addr().(*net.TCPAddr).Port
	if err := s.startMongo("127.0.0.1:0"); err != nil {
		s.Close()
		return nil, err
	}
	relay, err := StartRelay(s.mongoAddr)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.relay = relay
	if err := s.connect(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Stack) startNATS(port int) error {
	ns, err := devstack.StartNATS(devstack.NATSOptions{Port: port, StoreDir: filepath.Join(s.dir, "nats")})
	if err != nil {
		return err
	}
	s.ns = ns
	return nil
}

func (s *Stack) startMongo(addr string) error {
	m, err := devstack.StartMongo(addr, filepath.Join(s.dir, "mongo"))
	if err != nil {
		return err
	}
	u, err := url.Parse(m.URI)
	if err != nil {
		m.Stop()
		return fmt.Errorf("parsing mongo URI %s: %w", m.URI, err)
	}
	s.mongo, s.mongoAddr = m, u.Host
	return nil
}

// connect opens the harness's own clients, straight to the servers (never
// through the proxy). They reconnect forever, so they ride out restarts.
func (s *Stack) connect() error {
	nc, err := nats.Connect(s.NATSURL(), nats.Name("crash-harness"),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return fmt.Errorf("connecting harness to NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return err
	}
	mc, err := mongo.Connect(options.Client().ApplyURI(s.MongoURI()).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		nc.Close()
		return fmt.Errorf("connecting harness to Mongo: %w", err)
	}
	s.nc, s.js, s.mc = nc, js, mc
	return nil
}

// NATSURL is the server's own address (the child gets the proxy's).
func (s *Stack) NATSURL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.natsPort) }

// NATSAddr is host:port of the server, what the proxy dials.
func (s *Stack) NATSAddr() string { return fmt.Sprintf("127.0.0.1:%d", s.natsPort) }

// MongoURI is the Mongo-compatible server's URI.
func (s *Stack) MongoURI() string { return "mongodb://" + s.mongoAddr + "/" }

// ChildMongoURI is the URI the child gets: through the relay, so an outage
// cuts its connections at once.
func (s *Stack) ChildMongoURI() string { return "mongodb://" + s.relay.Addr() + "/" }

// DB is the harness's handle on one database.
func (s *Stack) DB(name string) *mongo.Database { return s.mc.Database(name) }

// RestartNATS stops nats-server, keeps it down for down, and starts it again
// on the same port and store directory: streams, consumer positions and the
// duplicate memory come back from disk.
func (s *Stack) RestartNATS(down time.Duration) error {
	devstack.StopNATS(s.ns)
	s.ns = nil
	time.Sleep(down)
	if err := s.startNATS(s.natsPort); err != nil {
		return fmt.Errorf("restarting nats-server: %w", err)
	}
	return nil
}

// RestartMongo stops the Mongo-compatible server, keeps it down for down,
// and starts it again on the same address and data directory.
func (s *Stack) RestartMongo(down time.Duration) error {
	s.relay.Cut()
	s.mongo.Stop() // serves its open connections for up to 3s more
	s.relay.Cut()  // in case the child reconnected before the listener closed
	s.mongo = nil
	time.Sleep(down)
	if err := s.startMongo(s.mongoAddr); err != nil {
		return fmt.Errorf("restarting mongo: %w", err)
	}
	return nil
}

// Close disconnects and stops both servers.
func (s *Stack) Close() {
	testkit.CloseClients(s.nc, s.mc)
	if s.relay != nil {
		s.relay.Close()
	}
	if s.mongo != nil {
		s.mongo.Stop()
	}
	if s.ns != nil {
		devstack.StopNATS(s.ns)
	}
}
