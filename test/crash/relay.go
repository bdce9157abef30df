package crash

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Relay forwards TCP connections to upstream byte for byte. The child
// reaches Mongo through one so a Mongo outage starts at once: FerretDB's
// own stop serves open connections for another three seconds, which would
// let in-flight handlers finish before the outage bites.
type Relay struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// StartRelay listens on a free loopback port and forwards to upstream.
func StartRelay(upstream string) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting relay: %w", err)
	}
	r := &Relay{ln: ln, conns: map[net.Conn]struct{}{}}
	r.wg.Go(func() { forwardEach(ln, &r.wg, upstream, r.serve) })
	return r, nil
}

// Addr is the relay's host:port.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Cut closes every open connection; new ones are forwarded as before (and
// fail while the server is down).
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		_ = c.Close()
	}
}

// Close stops the relay and waits for its goroutines.
func (r *Relay) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	_ = r.ln.Close()
	r.Cut()
	r.wg.Wait()
}

func (r *Relay) serve(client, server net.Conn) {
	if !r.track(client, server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
		_ = client.Close()
	})
	_, _ = io.Copy(client, server)
	_ = client.Close()
	_ = server.Close()
	wg.Wait()
	r.untrack(client, server)
}

func (r *Relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *Relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}
