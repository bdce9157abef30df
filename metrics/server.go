package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/jetfn/jetfn/runtime"
)

// DefaultPingTimeout bounds the MongoDB ping behind /readyz, so a probe
// answers before a kubelet's own timeout (1s by default) would.
const DefaultPingTimeout = 800 * time.Millisecond

// shutdownTimeout bounds how long Close waits for in-flight scrapes.
const shutdownTimeout = 5 * time.Second

// Runtime is what Serve needs from *runtime.Runtime.
type Runtime interface {
	StatsSource
	Ready() <-chan struct{}
	// ConsumerProblems names functions whose consumer is missing.
	ConsumerProblems() error
	// WorkersStuck names functions whose every worker was taken by a
	// handler abandoned after its timeout.
	WorkersStuck() error
	// RemotesUnanswered names remote functions whose endpoint has no
	// responders.
	RemotesUnanswered() error
}

// Connection is the NATS connection: *nats.Conn.
type Connection interface {
	IsConnected() bool
}

// Pinger is the MongoDB client: *mongo.Client.
type Pinger interface {
	Ping(ctx context.Context, rp *readpref.ReadPref) error
}

// Probes are the dependencies /readyz checks beside the runtime. A nil Mongo
// is not checked (a runtime without a database).
type Probes struct {
	NATS        Connection
	Mongo       Pinger
	PingTimeout time.Duration // default DefaultPingTimeout
}

// Server is the running HTTP listener.
type Server struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

// Serve registers rt's counters and serves /metrics, /healthz and /readyz on
// addr (host:port; ":0" picks a port, see Addr) until Close.
func (m *Metrics) Serve(addr string, rt Runtime, probes Probes) (*Server, error) {
	if err := m.Register(rt); err != nil {
		return nil, fmt.Errorf("registering the runtime's metrics: %w", err)
	}
	if probes.PingTimeout <= 0 {
		probes.PingTimeout = DefaultPingTimeout
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", readyHandler(rt, probes))
	s := &Server{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // ErrServerClosed after Close; nothing else ends it
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Close stops accepting, lets in-flight requests finish for a few seconds
// and waits for the serving goroutine.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}

// readyHandler answers 200 when every check passes, else 503; the body
// names each check either way, so a failing probe explains itself.
func readyHandler(rt Runtime, p Probes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		checks := readiness(r.Context(), rt, p)
		var b strings.Builder
		failed := false
		for _, c := range checks {
			if c.err != nil {
				failed = true
				fmt.Fprintf(&b, "fail %s: %v\n", c.name, c.err)
				continue
			}
			fmt.Fprintf(&b, "ok   %s\n", c.name)
		}
		if failed {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, b.String())
	}
}

type check struct {
	name string
	err  error
}

func readiness(ctx context.Context, rt Runtime, p Probes) []check {
	checks := []check{{name: "functions"}, {name: "nats"}}
	select {
	case <-rt.Ready():
	default:
		checks[0].err = errors.New("not every function is bound yet")
	}
	if p.NATS == nil || !p.NATS.IsConnected() {
		checks[1].err = errors.New("not connected")
	}
	checks = append(checks, check{name: "consumers", err: rt.ConsumerProblems()},
		check{name: "workers", err: rt.WorkersStuck()}, check{name: "remotes", err: rt.RemotesUnanswered()})
	if p.Mongo != nil {
		ctx, cancel := context.WithTimeout(ctx, p.PingTimeout)
		defer cancel()
		checks = append(checks, check{name: "mongo", err: p.Mongo.Ping(ctx, nil)})
	}
	return checks
}

var _ Runtime = (*runtime.Runtime)(nil)
