package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/internal/discovery"
)

// DefaultRemoteProbe is how often a remote function's binding asks micro
// discovery ($SRV.INFO) which instances serve its endpoint.
const DefaultRemoteProbe = 5 * time.Second

// remoteProbeWindow is how long one probe collects $SRV.INFO answers.
const remoteProbeWindow = 500 * time.Millisecond

// remoteState is what a remote function's binding knows of its endpoint's
// responders. Two cheap observations feed it, the newer one wins: every
// request (a reply proves a responder, a no-responders status proves
// none, at once) and a probe every DefaultRemoteProbe, which also counts
// the instances for status. /readyz fails while it says no responders.
type remoteState struct {
	subject string

	mu        sync.Mutex
	instances int  // from the last probe; -1 before the first
	none      bool // the last observation found no responder
	noneSince time.Time
}

func newRemoteState(subject string) *remoteState {
	return &remoteState{subject: subject, instances: -1}
}

func (s *remoteState) replied() { s.observe(false) }

func (s *remoteState) noResponders() { s.observe(true) }

func (s *remoteState) observe(none bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if none && !s.none {
		s.noneSince = time.Now()
	}
	s.none = none
}

func (s *remoteState) probed(instances int) {
	s.mu.Lock()
	s.instances = instances
	s.mu.Unlock()
	s.observe(instances == 0)
}

// problem is why /readyz should fail, or nil.
func (s *remoteState) problem() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.none {
		return nil
	}
	return fmt.Errorf("no responders on remote %s since %s", s.subject, s.noneSince.UTC().Format(time.RFC3339))
}

// fill puts the state into a function's Stats.
func (s *remoteState) fill(st *Stats) {
	st.Remote = s.subject
	s.mu.Lock()
	st.RemoteInstances = max(s.instances, 0)
	s.mu.Unlock()
	if err := s.problem(); err != nil {
		st.RemoteError = err.Error()
	}
}

// watch probes at once and then every interval until ctx is done. A probe
// that fails (a reconnect) changes nothing: requests keep observing.
func (s *remoteState) watch(ctx context.Context, nc *nats.Conn, interval time.Duration, log *slog.Logger) {
	for {
		infos, err := discovery.Infos(ctx, nc, min(remoteProbeWindow, interval))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("looking up remote instances", "remote", s.subject, "err", err)
		default:
			s.probed(len(discovery.Serving(infos, s.subject)))
		}
		pause(ctx, interval)
	}
}
