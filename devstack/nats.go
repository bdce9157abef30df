package devstack

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long an embedded server may take to accept clients.
const readyTimeout = 10 * time.Second

// NATSOptions configure an embedded nats-server.
type NATSOptions struct {
	// Host and Port to listen on; Port -1 picks a free port.
	Host string
	Port int
	// StoreDir keeps streams, consumer positions and the duplicate memory;
	// the same dir after a restart brings them all back.
	StoreDir string
}

// StartNATS starts an embedded nats-server with JetStream and waits until it
// accepts clients. It never takes the process's signals: the process that
// embeds it decides when it stops.
func StartNATS(o NATSOptions) (*server.Server, error) {
	if o.StoreDir == "" {
		return nil, errors.New("starting nats-server: StoreDir is required")
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "jetfn-dev",
		Host:       host,
		Port:       o.Port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("starting nats-server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(readyTimeout) {
		ns.Shutdown()
		return nil, fmt.Errorf("starting nats-server: not ready after %s (is port %d taken?)", readyTimeout, o.Port)
	}
	return ns, nil
}

// StopNATS shuts the server down and waits until it has.
func StopNATS(ns *server.Server) {
	ns.Shutdown()
	ns.WaitForShutdown()
}

// StartScratchNATS starts an embedded nats-server on a free port and a
// fresh store of its own, made under parent (the system's temp dir when
// empty), for a benchmark that must not inherit another run's streams.
// stop shuts the server down and removes the store.
func StartScratchNATS(parent, prefix string) (ns *server.Server, stop func(), err error) {
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, nil, err
	}
	ns, err = StartNATS(NATSOptions{Port: -1, StoreDir: dir})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return ns, func() {
		StopNATS(ns)
		os.RemoveAll(dir)
	}, nil
}
