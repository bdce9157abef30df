package crash

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
)

// Action is what the proxy does with an operation of one Class.
type Action int

const (
	// Pass forwards the operation.
	Pass Action = iota
	// Drop discards the operation and keeps forwarding what follows.
	Drop
	// Freeze holds the operation and everything after it, on every
	// connection open at that moment: nothing more reaches the server. Held
	// operations are never forwarded; the child is killed next.
	Freeze
)

func (a Action) String() string {
	switch a {
	case Drop:
		return "drop"
	case Freeze:
		return "freeze"
	default:
		return "pass"
	}
}

// Proxy sits between the child and nats-server. It reads the client's side
// of the NATS protocol one operation at a time, so it can tell a publish to
// the notify subject from a JetStream ack, and pass, drop or freeze either.
// The server's side is copied as is.
//
// Rules apply from the next operation read; Reset returns to passing
// everything for new connections, while a connection already frozen stays
// frozen until its client (the killed child) goes away.
type Proxy struct {
	ln     net.Listener
	notify string
	log    *slog.Logger
	wg     sync.WaitGroup

	mu     sync.Mutex
	rules  [numClasses]Action
	conns  map[*proxyConn]struct{}
	counts [numClasses][Freeze + 1]int
	closed bool
}

// proxyConn is one client connection and its server connection.
type proxyConn struct {
	client, server net.Conn
	frozen         bool // guarded by Proxy.mu
}

// StartProxy listens on a free loopback port and forwards each connection
// to upstream (host:port). notify is the subject ClassNotify matches.
func StartProxy(upstream, notify string, log *slog.Logger) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting proxy: %w", err)
	}
	p := &Proxy{ln: ln, notify: notify, log: log, conns: map[*proxyConn]struct{}{}}
	p.wg.Go(func() { forwardEach(ln, &p.wg, upstream, p.serve) })
	return p, nil
}

// URL is the nats:// URL clients use to go through the proxy.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Set sets the action for one class of operations.
func (p *Proxy) Set(c Class, a Action) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules[c] = a
}

// Freeze holds everything from now on, on every open connection.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.freezeLocked()
}

func (p *Proxy) freezeLocked() {
	for c := range p.conns {
		c.frozen = true
	}
}

// Reset passes every class again and zeroes the counts. Connections that
// are frozen stay frozen.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = [numClasses]Action{}
	p.counts = [numClasses][Freeze + 1]int{}
}

// Cut closes every open connection, frozen or not, with what it held: its
// client reconnects through the proxy, which passes everything again
// unless told otherwise (Freeze marks only connections open at the time).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.close()
	}
}

// Count is how many operations of class c got action a since the last Reset.
func (p *Proxy) Count(c Class, a Action) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[c][a]
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

// serve forwards one connection until either side closes it.
func (p *Proxy) serve(client, server net.Conn) {
	c := &proxyConn{client: client, server: server}
	if !p.register(c) {
		c.close()
		return
	}
	defer p.unregister(c)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		_, _ = io.Copy(client, server)
		c.close()
	})
	err := p.pump(c)
	c.close()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.ECONNRESET) {
		p.log.Warn("proxy connection", "err", err)
	}
}

func (p *Proxy) register(c *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) unregister(c *proxyConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// pump reads the client's operations and forwards, drops or holds each.
func (p *Proxy) pump(c *proxyConn) error {
	r := bufio.NewReaderSize(c.client, 64*1024)
	for {
		f, err := readFrame(r, p.notify)
		if err != nil {
			return err
		}
		if p.decide(c, f.class) != Pass {
			continue
		}
		if _, err := c.server.Write(f.raw); err != nil {
			return err
		}
	}
}

// decide applies the rule for class to one operation on c and counts it.
func (p *Proxy) decide(c *proxyConn, class Class) Action {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.rules[class]
	if a == Freeze {
		p.freezeLocked()
	}
	if c.frozen {
		a = Freeze
	}
	p.counts[class][a]++
	return a
}

func (c *proxyConn) close() {
	_ = c.client.Close()
	_ = c.server.Close()
}
