package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
)

// Kind is one kind of fault the harness injects.
type Kind string

// The fault kinds. Every SIGKILLed node is started again on its own store
// once the cluster has moved on without it (new leaders elected, sessions
// handled again), except in KillRestart, where it comes back at once.
const (
	// KillStreamLeader SIGKILLs the node that leads TRANSCRIPTION.
	KillStreamLeader Kind = "kill-stream-leader"
	// KillConsumerLeader SIGKILLs the node that leads summarize-session's
	// consumer.
	KillConsumerLeader Kind = "kill-consumer-leader"
	// KillRandom SIGKILLs any node.
	KillRandom Kind = "kill-random"
	// PauseStreamLeader SIGSTOPs the stream leader's node for longer than
	// the Raft election timeout (at most 9s), then SIGCONTs it: it wakes up
	// believing it still leads.
	PauseStreamLeader Kind = "pause-stream-leader"
	// KillRestart SIGKILLs any node and starts it again on its store at
	// once, before its peers' election timeout.
	KillRestart Kind = "kill-restart-at-once"
	// KillJetfnDuringKill SIGKILLs the stream leader's node and then one
	// jetfn instance while the node is down; both come back.
	KillJetfnDuringKill Kind = "kill-jetfn-during-node-kill"
)

// Kinds is every fault kind in the order a run cycles through them.
var Kinds = []Kind{KillStreamLeader, KillConsumerLeader, KillRandom, PauseStreamLeader, KillRestart, KillJetfnDuringKill}

// pauseFor is longer than nats-server's maximum election timeout (9s), so
// the paused node's peers elect a new leader while it sleeps.
const pauseFor = 12 * time.Second

// recoverWithin bounds the wait for the cluster to move on without a
// killed node; past it the node is restarted anyway and the fault reports
// that it did not recover while down.
const recoverWithin = 90 * time.Second

// Fault is one injected fault and what the harness saw of it.
type Fault struct {
	Kind   Kind
	Victim string // the node
	// StreamLeader and ConsumerLeader are the leaders before the fault.
	StreamLeader, ConsumerLeader string
	// At is when the fault began; Restored when the node ran again (its
	// restart or SIGCONT); Healthy when every node answered /healthz again.
	At, Restored, Healthy time.Time
	// RecoveredDown is false when no session was handled while a killed
	// node was down (within recoverWithin).
	RecoveredDown bool
	// Jetfn is the instance killed (KillJetfnDuringKill), -1 otherwise.
	Jetfn int
	// PublisherOn is the node the publisher was connected to: a client on
	// a paused node hangs with it.
	PublisherOn string
	// Stall, Recovery and Recovered are measured once the run settled
	// (see measure).
	Stall, Recovery time.Duration
	Recovered       bool
}

// inject runs one fault of kind k from a healthy cluster with leaders and
// returns once every node is healthy again.
func (h *Harness) inject(ctx context.Context, k Kind, n int) (Fault, error) {
	f := Fault{Kind: k, Jetfn: -1}
	if err := h.waitSteady(ctx); err != nil {
		return f, err
	}
	var sl, cl string
	err := testkit.Retry(ctx, readWithin, "reading the leaders", func(ctx context.Context) error {
		var err error
		sl, cl, err = testkit.Leaders(ctx, h.js, transcriptionStream, functionName)
		return err
	})
	if err != nil {
		return f, err
	}
	f.StreamLeader, f.ConsumerLeader = sl, cl
	f.Victim = h.victim(k, sl, cl)
	nd := h.cluster.Node(f.Victim)
	if nd == nil {
		return f, fmt.Errorf("%s: no node %q", k, f.Victim)
	}
	f.PublisherOn = h.nc.ConnectedServerName()
	h.opts.Log.Info("fault", "kind", k, "n", n+1, "victim", f.Victim, "stream_leader", sl, "consumer_leader", cl,
		"publisher_on", f.PublisherOn)
	f.At = time.Now()
	switch k {
	case PauseStreamLeader:
		err = h.pause(ctx, nd, &f)
	case KillRestart:
		nd.Kill()
		f.RecoveredDown = true // it is never down long enough to matter
		err = h.restart(ctx, nd, &f)
	case KillJetfnDuringKill:
		err = h.killWithJetfn(ctx, nd, n, &f)
	default:
		nd.Kill()
		f.RecoveredDown = h.awaitMovedOn(ctx, f.Victim, f.At)
		err = h.restart(ctx, nd, &f)
	}
	if err != nil {
		return f, err
	}
	if err := h.waitHealthy(ctx); err != nil {
		return f, err
	}
	f.Healthy = time.Now()
	return f, nil
}

// victim names the node a fault of kind k hits.
func (h *Harness) victim(k Kind, streamLeader, consumerLeader string) string {
	switch k {
	case KillConsumerLeader:
		return consumerLeader
	case KillRandom, KillRestart:
		return h.cluster.Nodes[rand.IntN(len(h.cluster.Nodes))].Name
	default:
		return streamLeader
	}
}

func (h *Harness) pause(ctx context.Context, nd *Node, f *Fault) error {
	if err := nd.Pause(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(pauseFor):
	}
	f.RecoveredDown = true
	if err := nd.Resume(); err != nil {
		return err
	}
	f.Restored = time.Now()
	return nil
}

func (h *Harness) restart(ctx context.Context, nd *Node, f *Fault) error {
	if err := nd.Start(ctx); err != nil {
		return err
	}
	f.Restored = time.Now()
	return nil
}

// killWithJetfn kills the node, then one jetfn instance (round robin), and
// waits until the survivors moved on before it starts both again.
func (h *Harness) killWithJetfn(ctx context.Context, nd *Node, n int, f *Fault) error {
	nd.Kill()
	f.Jetfn = n % len(h.instances)
	in := h.instances[f.Jetfn]
	in.proc.Kill()
	in.proc = nil
	f.RecoveredDown = h.awaitMovedOn(ctx, f.Victim, f.At)
	if err := h.restart(ctx, nd, f); err != nil {
		return err
	}
	return in.start(ctx)
}

// awaitMovedOn waits until the stream and the consumer are led by other
// nodes than the dead one and a session published after the fault was
// handled: the cluster works without it.
func (h *Harness) awaitMovedOn(ctx context.Context, dead string, at time.Time) bool {
	ctx, cancel := context.WithTimeout(ctx, recoverWithin)
	defer cancel()
	err := testkit.Poll(ctx, 200*time.Millisecond, "the cluster to move on without "+dead, func(ctx context.Context) bool {
		sl, cl, err := testkit.Leaders(ctx, h.js, transcriptionStream, functionName)
		return err == nil && sl != dead && cl != dead && sl != "" && cl != "" && h.handledSince(ctx, at)
	})
	return err == nil
}

// waitSteady waits until every node is healthy, the stream and consumer
// have leaders with current replicas, and sessions are being handled.
func (h *Harness) waitSteady(ctx context.Context) error {
	if err := h.waitHealthy(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := testkit.WaitCurrent(ctx, h.js, transcriptionStream, functionName); err != nil {
		return err
	}
	now := time.Now()
	return testkit.Poll(ctx, 200*time.Millisecond, "sessions handled", func(ctx context.Context) bool {
		return h.handledSince(ctx, now)
	})
}
