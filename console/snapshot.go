package console

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/ops/status"
)

// snapshot is one poll of the stack: every function with its instances.
type snapshot struct {
	At        time.Time
	Functions []*functionView
	// Err is why the poll failed, shown instead of the functions.
	Err string
}

// functionView is one function across its instances.
type functionView struct {
	Name, Version    string
	Stream, Consumer string
	Remote           string
	Instances        []instanceView
	Rate             float64
	History          []float64
	P50, P99         float64 // the highest among instances
	Handled, Acked   uint64
	Retried, Dead    uint64
	Abandoned        uint64
	InFlight         int64
	Concurrency      int
	Backlog          consumerView
	Problem          string // a missing consumer or remote, else the last error
	Digests          []string
}

// consumerView is the durable consumer's state as its leader reports it.
type consumerView struct {
	Pending      uint64
	AckPending   int
	Redelivered  int
	Waiting      int
	Leader       string
	AckFloorSeq  uint64
	DeliveredSeq uint64
	Err          string
}

// instanceView is one instance of a function.
type instanceView struct {
	status.Instance
	Rate     float64
	Revision uint64 // the deployment revision with its digest; 0 if none
}

// poll collects one snapshot: $SRV.STATS for the instances, then one
// consumer info per function (JetStream answers it from the consumer's
// leader, so pending figures are the leader's, not a follower's).
func (s *Server) poll(ctx context.Context) *snapshot {
	at := time.Now()
	instances, err := status.Collect(ctx, s.cfg.NATS, s.opts.window)
	if err != nil {
		return &snapshot{At: at, Err: err.Error()}
	}
	fnRates, instRates := s.rates.observe(at, instances)
	revs := s.revisions.byDigest()
	byName := map[string]*functionView{}
	var out []*functionView
	for _, in := range instances {
		f := byName[in.Function]
		if f == nil {
			f = &functionView{Name: in.Function, Version: in.Version, Stream: in.Metadata["stream"],
				Consumer: in.Metadata["consumer"], Remote: in.Metadata["remote"], Rate: fnRates[in.Function],
				History: s.rates.historyOf(in.Function)}
			byName[in.Function] = f
			out = append(out, f)
		}
		f.add(instanceView{Instance: in, Rate: instRates[in.ID], Revision: revs[in.ManifestDigest]})
	}
	for _, f := range out {
		f.Backlog = s.consumerState(ctx, f.Stream, f.Consumer)
	}
	slices.SortFunc(out, func(a, b *functionView) int { return cmp.Compare(a.Name, b.Name) })
	return &snapshot{At: at, Functions: out}
}

// add sums one instance into the function's figures.
func (f *functionView) add(in instanceView) {
	st := in.Stats
	f.Instances = append(f.Instances, in)
	f.Handled += st.Handled
	f.Acked += st.Acked
	f.Retried += st.Retried
	f.Dead += st.DeadLettered
	f.Abandoned += st.Abandoned
	f.InFlight += st.InFlight
	f.Concurrency += st.Concurrency
	f.P50, f.P99 = max(f.P50, st.P50Millis), max(f.P99, st.P99Millis)
	if p := problemOf(in.Instance); p != "" && f.Problem == "" {
		f.Problem = p
	}
	if !slices.Contains(f.Digests, in.ManifestDigest) {
		f.Digests = append(f.Digests, in.ManifestDigest)
	}
}

// problemOf is what is wrong with an instance, the worst first: a missing
// consumer explains an idle function better than its last handler error.
func problemOf(in status.Instance) string {
	return cmp.Or(in.Stats.ConsumerError, in.Stats.RemoteError, in.Stats.ManifestRefused, in.Stats.LastError)
}

// consumerState asks for the consumer's info.
func (s *Server) consumerState(ctx context.Context, stream, durable string) consumerView {
	if stream == "" || durable == "" {
		return consumerView{Err: "no consumer in the instance's metadata"}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := s.js.Consumer(ctx, stream, durable)
	if err != nil {
		return consumerView{Err: err.Error()}
	}
	return consumerViewOf(c.CachedInfo())
}

func consumerViewOf(info *jetstream.ConsumerInfo) consumerView {
	v := consumerView{Pending: info.NumPending, AckPending: info.NumAckPending, Redelivered: info.NumRedelivered,
		Waiting: info.NumWaiting, AckFloorSeq: info.AckFloor.Stream, DeliveredSeq: info.Delivered.Stream}
	if info.Cluster != nil {
		v.Leader = info.Cluster.Leader
	}
	return v
}

// function is the named function of the latest snapshot, or nil.
func (sn *snapshot) function(name string) *functionView {
	for _, f := range sn.Functions {
		if f.Name == name {
			return f
		}
	}
	return nil
}
