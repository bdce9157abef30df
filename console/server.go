package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Server is the console. Create it with New, serve it with Run.
type Server struct {
	cfg       Config
	opts      options
	js        jetstream.JetStream
	pages     *pages
	rates     *rates
	revisions *revisionCache
	jobs      *jobs
	auth      *auth
	actions   map[string]action
	latest    atomic.Pointer[snapshot]
	// pollNow asks the poller for a snapshot at once (after an action).
	pollNow chan struct{}
	// work owns the replays and the poller: Run waits for them.
	work sync.WaitGroup
	// runCtx ends the replays with Run; set before Run serves.
	runCtx context.Context
}

// New checks the settings and parses the pages; it touches no server.
func New(cfg Config, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{interval: DefaultInterval, window: DefaultWindow}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	js, err := jetstream.New(cfg.NATS)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, opts: o, js: js, pages: p, rates: newRates(), jobs: newJobs(),
		auth: newAuth(o.token), pollNow: make(chan struct{}, 1), runCtx: context.Background()}
	s.revisions = &revisionCache{js: js, deployment: cfg.Deployment}
	s.actions = s.actionTable()
	return s, nil
}

// ReadOnly reports whether every action is refused (no token).
func (s *Server) ReadOnly() bool { return !s.auth.enabled() }

// Run serves on ln until ctx is done, polling the stack every interval,
// then shuts the listener down and waits for running replays, which end
// with ctx between two dead letters.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	s.runCtx = ctx
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	s.work.Go(func() { s.pollLoop(ctx) })
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(shutCtx)
		cancel()
		<-served
	case err = <-served:
	}
	s.work.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// pollLoop keeps the latest snapshot fresh until ctx is done.
func (s *Server) pollLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.interval)
	defer t.Stop()
	for {
		s.revisions.refreshIfStale(ctx, s.opts.interval*5)
		s.latest.Store(s.poll(ctx))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.pollNow:
		}
	}
}

// snapshot is the latest poll, taking one now if none is fresh (a Server
// used through Handler without Run, or a poll that stalled).
func (s *Server) snapshot(ctx context.Context) *snapshot {
	if sn := s.latest.Load(); sn != nil && time.Since(sn.At) < 2*s.opts.interval+s.opts.window {
		return sn
	}
	s.revisions.refreshIfStale(ctx, s.opts.interval*5)
	sn := s.poll(ctx)
	s.latest.Store(sn)
	return sn
}

// refresh asks the poller for a new snapshot at once.
func (s *Server) refresh() {
	select {
	case s.pollNow <- struct{}{}:
	default:
	}
}
