package opscheck

import (
	"fmt"
	"net/url"
	"path/filepath"
	"sync"

	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/test/crash"
)

// mongoServer is the embedded FerretDB, stopped and started again on the
// same address and data for an outage (as simulate's
// TestCallRidesOutMongoOutage does). Every child reaches it through a
// relay, so an outage cuts their open connections at once: FerretDB's own
// stop serves them for three more seconds.
type mongoServer struct {
	dir   string
	addr  string
	relay *crash.Relay

	mu  sync.Mutex
	srv *devstack.Mongo
}

func startMongo(dir string) (*mongoServer, error) {
	m := &mongoServer{dir: filepath.Join(dir, "mongo")}
	srv, err := devstack.StartMongo("127.0.0.1:0", m.dir)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(srv.URI)
	if err != nil {
		srv.Stop()
		return nil, fmt.Errorf("parsing %s: %w", srv.URI, err)
	}
	m.srv, m.addr = srv, u.Host
	if m.relay, err = crash.StartRelay(m.addr); err != nil {
		srv.Stop()
		return nil, err
	}
	return m, nil
}

// URI is the server's own address, for the checker's reads.
func (m *mongoServer) URI() string { return "mongodb://" + m.addr + "/" }

// ChildURI goes through the relay.
func (m *mongoServer) ChildURI() string { return "mongodb://" + m.relay.Addr() + "/" }

// Down stops the server and cuts every relayed connection.
func (m *mongoServer) Down() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.relay.Cut()
	if m.srv != nil {
		m.srv.Stop()
		m.srv = nil
	}
	m.relay.Cut()
}

// Up starts the server again on the same address and data; it does nothing
// when it runs.
func (m *mongoServer) Up() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.srv != nil {
		return nil
	}
	srv, err := devstack.StartMongo(m.addr, m.dir)
	if err != nil {
		return fmt.Errorf("restarting mongo on %s: %w", m.addr, err)
	}
	m.srv = srv
	return nil
}

// Close stops the relay and the server.
func (m *mongoServer) Close() {
	m.relay.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.srv != nil {
		m.srv.Stop()
		m.srv = nil
	}
}
