package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Mongo is an embedded MongoDB-compatible server: FerretDB with its SQLite
// backend. It speaks the MongoDB wire protocol, so the same driver code runs
// against it and against a real MongoDB. It has no transactions, TTL or
// partial indexes and no change streams; jetfn does not rely on them.
type Mongo struct {
	URI    string
	cancel context.CancelFunc
	done   chan error
	stop   sync.Once
}

// StartMongo starts FerretDB listening on addr (host:port; port 0 picks a
// free one) with its data in dir, which is created if needed.
func StartMongo(addr, dir string) (*Mongo, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("starting mongo: %w", err)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener: ferretdb.ListenerConfig{TCP: addr},
		Handler:  "sqlite",
		// The trailing slash is required: FerretDB treats the URI as a
		// directory with one file per database.
		SQLiteURL: "file:" + dir + "/",
		// FerretDB logs every connection at info level.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return nil, fmt.Errorf("starting mongo: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mongo{cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- f.Run(ctx) }()
	m.URI = f.MongoDBURI()
	select {
	case err := <-m.done:
		cancel()
		return nil, fmt.Errorf("starting mongo on %s: %w", addr, errOrStopped(err))
	default:
	}
	return m, nil
}

// Stop shuts the server down and waits for it; a second call does nothing.
func (m *Mongo) Stop() {
	m.stop.Do(func() {
		m.cancel()
		<-m.done
	})
}

func errOrStopped(err error) error {
	if err == nil {
		return errors.New("server stopped at once")
	}
	return err
}
