package testkit

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// WaitCurrent waits until the stream and the consumer have a leader and
// every replica is current, so the next stop finds a full quorum again.
func WaitCurrent(ctx context.Context, js jetstream.JetStream, stream, consumer string) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if sl, cl, err := Leaders(ctx, js, stream, consumer); err == nil && sl != "" && cl != "" &&
			replicasCurrent(ctx, js, stream, consumer) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for every replica of %s/%s to be current: %w", stream, consumer, ctx.Err())
		case <-t.C:
		}
	}
}

// Leaders names the servers that lead the stream and the consumer; while
// either has none, it says so with ErrNoLeader (Transient).
func Leaders(ctx context.Context, js jetstream.JetStream, stream, consumer string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", "", err
	}
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return "", "", err
	}
	si, ci := s.CachedInfo(), c.CachedInfo()
	if si.Cluster == nil || ci.Cluster == nil {
		return "", "", fmt.Errorf("%s/%s: no cluster info", stream, consumer)
	}
	if si.Cluster.Leader == "" || ci.Cluster.Leader == "" {
		return si.Cluster.Leader, ci.Cluster.Leader, fmt.Errorf("%s/%s: stream leader %q, consumer leader %q: %w",
			stream, consumer, si.Cluster.Leader, ci.Cluster.Leader, ErrNoLeader)
	}
	return si.Cluster.Leader, ci.Cluster.Leader, nil
}

func replicasCurrent(ctx context.Context, js jetstream.JetStream, stream, consumer string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return false
	}
	for _, cl := range []*jetstream.ClusterInfo{s.CachedInfo().Cluster, c.CachedInfo().Cluster} {
		if cl == nil || len(cl.Replicas) == 0 {
			return false
		}
		for _, p := range cl.Replicas {
			if !p.Current || p.Offline {
				return false
			}
		}
	}
	return true
}
