package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jetfn/jetfn/internal/discovery"
	"github.com/jetfn/jetfn/wire"
)

// DefaultRemoteProbe is how often a runtime asks micro discovery
// ($SRV.INFO) which instances serve its remote functions' endpoints.
const DefaultRemoteProbe = 5 * time.Second

// remoteProbeWindow is how long one probe collects $SRV.INFO answers.
const remoteProbeWindow = 500 * time.Millisecond

// remoteState is what a remote function's binding knows of its endpoint's
// responders. Two cheap observations feed it, the newer one wins: every
// request (a reply proves a responder; a no-responders status, which the
// server sends at once, proves none) and the runtime's probe
// (watchRemotes), which also counts the instances for status. /readyz
// fails while it says no responders, and before either has said anything:
// the first probe collects answers for remoteProbeWindow after the
// binding starts, and passing meanwhile would promise a responder nobody
// has seen.
type remoteState struct {
	subject string

	mu        sync.Mutex
	instances int  // from the last probe; 0 before the first
	none      bool // the last observation found no responder
	noneSince time.Time
	// observed is when the observation behind none was made: a probe's
	// answer is as old as its question, and a reply that came after the
	// question is newer. Zero until the first observation.
	observed time.Time
}

func newRemoteState(subject string) *remoteState {
	return &remoteState{subject: subject}
}

func (s *remoteState) replied() { s.observe(false, time.Now()) }

func (s *remoteState) noResponders() { s.observe(true, time.Now()) }

// observe records what was seen at `at`, unless something seen later is
// recorded already.
func (s *remoteState) observe(none bool, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at.Before(s.observed) {
		return
	}
	if none && !s.none {
		s.noneSince = at
	}
	s.none, s.observed = none, at
}

// probed records a probe sent at asked that found instances.
func (s *remoteState) probed(instances int, asked time.Time) {
	s.mu.Lock()
	s.instances = instances
	s.mu.Unlock()
	s.observe(instances == 0, asked)
}

// problem is why /readyz should fail, or nil.
func (s *remoteState) problem() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.observed.IsZero() {
		return fmt.Errorf("no responder known yet on remote %s: the first discovery probe has not answered", s.subject)
	}
	if !s.none {
		return nil
	}
	return fmt.Errorf("no responders on remote %s since %s", s.subject, s.noneSince.UTC().Format(time.RFC3339))
}

// fill puts the state into a function's wire.Stats.
func (s *remoteState) fill(st *wire.Stats) {
	st.Remote = s.subject
	s.mu.Lock()
	st.RemoteInstances = s.instances
	s.mu.Unlock()
	if err := s.problem(); err != nil {
		st.RemoteError = err.Error()
	}
}

// watchRemotes probes every remoteProbe, and at once when a remote
// function is bound, until ctx is done. One $SRV.INFO round serves every
// remote function of the runtime, so the cost is one request per instance
// per interval however many remotes the manifest has; none is sent while
// it has none. A probe that fails (a reconnect) changes nothing: requests
// keep observing.
func (r *Runtime) watchRemotes(ctx context.Context) {
	everyOrKicked(ctx, r.opts.remoteProbe, r.probeNow, r.probeRemotes)
}

// probeRemotesNow asks watchRemotes for a probe without waiting for it.
func (r *Runtime) probeRemotesNow() {
	select {
	case r.probeNow <- struct{}{}:
	default: // one is asked for already
	}
}

func (r *Runtime) probeRemotes(ctx context.Context) {
	var states []*remoteState
	for _, a := range r.bound() {
		if a.b.remote != nil {
			states = append(states, a.b.remote)
		}
	}
	if len(states) == 0 {
		return
	}
	asked := time.Now()
	infos, err := discovery.Infos(ctx, r.nc, min(remoteProbeWindow, r.opts.remoteProbe))
	if err != nil {
		if ctx.Err() == nil {
			r.opts.log.Warn("looking up remote functions' instances", "err", err)
		}
		return
	}
	for _, s := range states {
		s.probed(len(discovery.Serving(infos, s.subject)), asked)
	}
}
