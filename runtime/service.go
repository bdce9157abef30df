package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// consumerInfoTimeout bounds the consumer lookup behind a status request, so
// a slow server cannot stall `nats micro stats`.
const consumerInfoTimeout = 2 * time.Second

// addService registers the binding as a NATS micro service, so `nats micro
// ls`, `info` and `stats` find every bound function with its version and
// JetStream counters. micro calls StatsHandler once per endpoint, which is
// why the counters live on the status endpoint.
func (b *binding) addService(nc *nats.Conn, digest string) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        b.spec.Name,
		Version:     b.spec.Version,
		Description: "jetfn function " + b.spec.Name,
		Metadata:    b.metadata(digest),
		StatsHandler: func(e *micro.Endpoint) any {
			if e.Name == runsEndpoint { // console: recent runs; status() asks for consumer info
				return b.runsSummary()
			}
			return b.status()
		},
	})
	if err != nil {
		return nil, fmt.Errorf("registering micro service %s: %w", b.spec.Name, err)
	}
	err = svc.AddEndpoint("status", micro.HandlerFunc(func(req micro.Request) {
		if err := req.RespondJSON(b.status()); err != nil {
			b.log.Warn("answering a status request", "err", err)
		}
	}), micro.WithEndpointSubject(manifest.StatusSubject(b.spec.Name)))
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("adding status endpoint of %s: %w", b.spec.Name, err)
	}
	if err := b.addRunsEndpoint(svc, nc.MaxPayload()); err != nil { // console: recent runs
		_ = svc.Stop()
		return nil, err
	}
	return svc, nil
}

func (b *binding) metadata(digest string) map[string]string {
	md := map[string]string{
		"stream":          b.spec.Stream,
		"consumer":        b.spec.Durable,
		"subject":         strings.Join(b.spec.FilterSubjects(), ","),
		"ack_wait":        metadataDuration(b.spec.AckWait),
		"max_deliver":     strconv.Itoa(b.spec.MaxDeliver),
		"heartbeat":       metadataDuration(b.spec.Heartbeat),
		"concurrency":     strconv.Itoa(b.spec.Concurrency),
		"manifest_digest": digest,
	}
	if b.spec.IsRemote() {
		md["remote"] = b.spec.Remote.Subject
	}
	return md
}

// metadataDuration is d to the millisecond, as a person reads it: the
// default heartbeat, ackWait/3, is 3.333333333s otherwise.
func metadataDuration(d time.Duration) string {
	if d < time.Millisecond {
		return d.String()
	}
	return d.Round(time.Millisecond).String()
}

// status is the function's counters plus its consumer's pending figures.
func (b *binding) status() wire.Stats {
	s := b.stats.snapshot(b.spec.Name)
	if b.refusal != nil {
		if note := b.refusal.Load(); note != nil {
			s.ManifestRefused = *note
		}
	}
	s.Concurrency = b.spec.Concurrency
	if b.rate != nil {
		s.RateLimit, s.RateHeld = b.spec.RateLimit.String(), b.rate.held.Load()
	}
	if b.spec.Schedule != nil {
		s.Schedule = b.spec.Schedule.Pattern()
	}
	if l := b.keyRate; l != nil {
		s.KeyRateLimit, s.KeyRateDeferred, s.KeyRateWaiting = b.spec.KeyRateLimit.String(), l.deferred.Load(), l.waiting.Load()
	}
	if b.lease != nil {
		s.Singleton = "standby"
		if b.lease.held.Load() {
			s.Singleton = "active"
		}
	}
	b.deployed.fill(&s)
	if b.remote != nil {
		b.remote.fill(&s)
	}
	if err := b.consumerErr(); err != nil {
		s.ConsumerError = err.Error()
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumerInfoTimeout)
	defer cancel()
	if b.parts != nil {
		b.keyStatus(ctx, &s)
		return s
	}
	if info, err := b.consumer.get().Info(ctx); err == nil {
		s.NumPending = info.NumPending
		s.NumAckPending = info.NumAckPending
		b.lastPending.Store(&consumerPending{pending: info.NumPending, ackPending: info.NumAckPending})
		notePause(&s, info)
	} else if last := b.lastPending.Load(); last != nil {
		// No leader answers (a failover) or the request timed out: the
		// last figures, not zeros, which would read as a function that
		// caught up (and scale a deployment down on jetfn_consumer_lag).
		s.NumPending, s.NumAckPending, s.PendingStale = last.pending, last.ackPending, true
	}
	return s
}

// consumerPending is the pending figures of a consumer's last info.
type consumerPending struct {
	pending    uint64
	ackPending int
}

// notePause records a consumer's server-side pause (`jetfn pause`) in
// the stats: the latest time any of the function's consumers resumes.
func notePause(s *wire.Stats, info *jetstream.ConsumerInfo) {
	if !info.Paused {
		return
	}
	until := time.Now().Add(info.PauseRemaining).UTC().Truncate(time.Second)
	if s.PausedUntil == nil || until.After(*s.PausedUntil) {
		s.PausedUntil = &until
	}
}
