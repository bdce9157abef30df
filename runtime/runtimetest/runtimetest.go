// Package runtimetest starts the real embedded servers that jetfn's tests
// run against: a nats-server with JetStream and FerretDB. Nothing here is a
// mock; each helper stops its server when the test ends.
package runtimetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/devstack"
)

// StartNATS starts an embedded nats-server with JetStream on a free port,
// storing in a fresh temp dir.
func StartNATS(t testing.TB) *server.Server {
	t.Helper()
	return StartNATSIn(t, t.TempDir())
}

// StartNATSIn starts the server on storeDir, so a test can restart it on the
// same data.
func StartNATSIn(t testing.TB, storeDir string) *server.Server {
	t.Helper()
	ns, err := devstack.StartNATS(devstack.NATSOptions{Port: -1, StoreDir: storeDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devstack.StopNATS(ns) })
	return ns
}

// Connect opens a client connection that closes when the test ends.
func Connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// StartMongo starts FerretDB on a free port with its data in a temp dir and
// returns a connected client.
func StartMongo(t testing.TB) (*devstack.Mongo, *mongo.Client) {
	t.Helper()
	m, err := devstack.StartMongo("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m, ConnectMongo(t, m.URI)
}

// ConnectMongo opens a driver client that disconnects when the test ends.
func ConnectMongo(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client
}

// Eventually polls cond every 10 ms until it is true or timeout passes, and
// fails the test with what it waited for. Tests wait with it, never with a
// sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Runner is what RunInBackground runs: a *runtime.Runtime. (An interface,
// so the runtime package's own tests can use this package.)
type Runner interface {
	Run(ctx context.Context) error
	Ready() <-chan struct{}
}

// RunInBackground runs r until the test ends and returns once it is ready;
// it fails the test if Run ends first or is not ready within 30 seconds.
func RunInBackground(t testing.TB, r Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-r.Ready():
	case <-done:
		t.Fatalf("Run ended before the runtime was ready: %v", runErr)
	case <-time.After(30 * time.Second):
		t.Fatal("runtime not ready after 30s")
	}
}

// StreamMessages returns every message stored on the stream, in sequence
// order, skipping deleted ones.
func StreamMessages(t testing.TB, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}
