package opscheck

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Kind names an operation.
type Kind string

// The operations. Publishes run on publisher lanes; every other kind is
// the nemesis's, run one after the other.
const (
	KPublish               Kind = "publish"
	KKillJetfn             Kind = "kill-jetfn"
	KKillAllJetfn          Kind = "kill-all-jetfn"
	KPauseJetfn            Kind = "pause-jetfn"
	KKillNATS              Kind = "kill-nats"
	KMongoOutage           Kind = "mongo-outage"
	KDeploy                Kind = "deploy"
	KRollback              Kind = "rollback"
	KDeleteConsumer        Kind = "delete-consumer"
	KDeleteConsumerAllDown Kind = "delete-consumer-all-down"
	KDeleteStream          Kind = "delete-stream"
	KReplay                Kind = "dlq-replay"
	KKillRemote            Kind = "kill-remote"
	KPartitionRemote       Kind = "partition-remote"
	KStrayStream           Kind = "stray-stream"
)

// Input variants. Their weights are percentages of the inputs, not
// nemesis weights.
const (
	// WStatusHeader is the share of inputs sent with an empty body and a
	// Status header (poison).
	WStatusHeader Kind = "input-status-header"
	// WTabHeader is the share of good inputs sent with a TAB in a header
	// value.
	WTabHeader Kind = "input-tab-header"
)

// Revision variants: the percentage of a deploy's revisions that change
// each thing (for each function where it applies).
const (
	WRemove         Kind = "revision-remove"
	WRenameDurable  Kind = "revision-rename-durable"
	WRenameFunction Kind = "revision-rename-function"
	WNarrow         Kind = "revision-narrow-filter"
)

// Op is one scheduled operation. At is the earliest start, from the start
// of the operations phase; a nemesis op also waits for the one before it.
type Op struct {
	Index int
	At    time.Duration
	Kind  Kind
	// Publishes.
	Lane  int
	Input *Input
	Mode  Mode
	// Faults and operator actions.
	Target int           // instance or node; -1 for all
	Family Family        // consumer and stream operations
	For    time.Duration // how long a fault lasts
	Rev    *Revision
	Replay string // dlq-replay: "seq", "function" or "all"
	Pick   int    // dlq-replay seq: which dead letter, modulo how many there are
}

// Schedule is every operation of a run, derived from its seed alone.
type Schedule struct {
	Seed      uint64
	Duration  time.Duration
	Instances int
	Nodes     int
	Prune     bool
	Ops       []Op
	// Keep, when not nil, lists the only nemesis operations that run (a
	// shrunk schedule); publishes always run.
	Keep []int
}

// lanes is how many publishers send at once.
const lanes = 3

// Weights are the nemesis's relative frequencies (a kind absent or zero
// never happens), and the percentages of the input and revision variants.
type Weights map[Kind]int

// DefaultWeights is the mix the checker runs unless told otherwise.
var DefaultWeights = Weights{
	KKillJetfn: 4, KKillAllJetfn: 1, KPauseJetfn: 2, KKillNATS: 2, KMongoOutage: 2,
	KDeploy: 5, KRollback: 2, KDeleteConsumer: 2, KDeleteConsumerAllDown: 2, KDeleteStream: 4,
	KReplay: 2, KKillRemote: 2, KPartitionRemote: 2, KStrayStream: 1,
	WStatusHeader: 2, WTabHeader: 3,
	WRemove: 10, WRenameDurable: 25, WRenameFunction: 25, WNarrow: 40,
}

// generator draws every choice of a schedule from one seeded source.
type generator struct {
	rng  *rand.Rand
	s    *Schedule
	w    Weights
	good []*Input // careful good inputs, for Resend
	n    int
	recs int // recording inputs so far: the next one's recording, round robin
}

// Generate builds the schedule of seed: publishes every PublishEvery on
// average for the whole duration, and nemesis operations from 2s until 4s
// before the end.
func Generate(seed uint64, d time.Duration, instances, nodes int, w Weights) *Schedule {
	g := &generator{rng: rand.New(rand.NewPCG(seed, seed^0x6f70736368656b)), w: w,
		s: &Schedule{Seed: seed, Duration: d, Instances: instances, Nodes: nodes}}
	g.s.Prune = g.rng.IntN(2) == 0
	g.publishes()
	g.nemesis()
	for i := range g.s.Ops {
		g.s.Ops[i].Index = i
	}
	return g.s
}

// PublishEvery is the mean gap between two publishes.
const PublishEvery = 150 * time.Millisecond

func (g *generator) publishes() {
	for at := time.Duration(0); at < g.s.Duration; at += g.between(PublishEvery/3, 5*PublishEvery/3) {
		op := Op{At: at, Kind: KPublish, Lane: g.n % lanes}
		op.Input, op.Mode = g.input()
		g.s.Ops = append(g.s.Ops, op)
	}
}

// input draws one input and its publisher: 55% for the remote function,
// half careful, one in eight poison.
func (g *generator) input() (*Input, Mode) {
	mode := g.pick([]string{string(Careful), string(Bare), string(Double), string(Resend)}, []int{50, 30, 10, 10})
	if Mode(mode) == Resend && len(g.good) > 0 {
		return g.good[len(g.good)-1-g.rng.IntN(min(len(g.good), 10))], Resend
	}
	if Mode(mode) == Resend {
		mode = string(Careful)
	}
	fam, subjects := Remote, remoteSubjects
	if g.rng.IntN(100) >= 55 {
		fam, subjects = Recording, recordingSubjects
	}
	status := g.weight(WStatusHeader)
	poison := Poison(g.pick([]string{string(Good), string(Schema), string(Empty), string(Status)},
		[]int{88 - status, 8, 4, status}))
	if poison == Status && g.w[WStatusHeader] == 0 {
		poison = Empty
	}
	g.n++
	rec := 0
	if fam == Recording {
		rec = g.recs % recordings // drawn from no source: the rest of the seed's schedule stays as it was
		g.recs++
	}
	in := newInput(g.s.Seed, g.n, fam, subjects[g.rng.IntN(len(subjects))], poison, rec)
	in.Tab = poison == Good && g.rng.IntN(100) < g.w[WTabHeader]
	if Mode(mode) == Careful && poison == Good {
		g.good = append(g.good, in)
	}
	return in, Mode(mode)
}

func (g *generator) nemesis() {
	kinds, weights := g.kinds()
	if len(kinds) == 0 {
		return
	}
	for at := 2 * time.Second; at < g.s.Duration-4*time.Second; {
		op := g.fault(Kind(g.pick(kinds, weights)))
		op.At = at
		if g.w[op.Kind] > 0 {
			g.s.Ops = append(g.s.Ops, op)
		}
		at += op.For + time.Second + g.between(time.Second, 3*time.Second)
	}
}

// weight is k's weight for drawing. A kind switched off (weight 0) is
// drawn with its default weight and then dropped, so switching one kind
// off leaves the rest of a seed's schedule as it was.
func (g *generator) weight(k Kind) int {
	if w := g.w[k]; w > 0 {
		return w
	}
	return DefaultWeights[k]
}

func (g *generator) kinds() ([]string, []int) {
	var kinds []string
	var weights []int
	for _, k := range allKinds {
		if w := g.weight(k); w > 0 {
			kinds, weights = append(kinds, string(k)), append(weights, w)
		}
	}
	return kinds, weights
}

// allKinds orders the nemesis kinds, so a seed draws the same ones
// whatever the map's order.
var allKinds = []Kind{KKillJetfn, KKillAllJetfn, KPauseJetfn, KKillNATS, KMongoOutage, KDeploy, KRollback,
	KDeleteConsumer, KDeleteConsumerAllDown, KDeleteStream, KReplay, KKillRemote, KPartitionRemote, KStrayStream}

// fault draws the parameters of one nemesis operation.
func (g *generator) fault(k Kind) Op {
	op := Op{Kind: k, Target: -1, Family: g.family()}
	switch k {
	case KKillJetfn, KPauseJetfn:
		op.Target = g.rng.IntN(g.s.Instances)
		op.For = g.between(500*time.Millisecond, maxOutage)
	case KKillAllJetfn:
		op.For = g.between(200*time.Millisecond, maxOutage/2)
	case KKillNATS:
		op.Target = g.rng.IntN(g.s.Nodes)
		op.For = g.between(200*time.Millisecond, 2*time.Second)
		if g.s.Nodes > 1 {
			op.For = g.between(time.Second, 8*time.Second)
		}
	case KMongoOutage:
		op.For = g.between(time.Second, 6*time.Second)
	case KKillRemote:
		op.For = g.between(500*time.Millisecond, 5*time.Second)
	case KPartitionRemote:
		op.For = g.between(3*time.Second, 12*time.Second)
	case KStrayStream:
		op.For = g.between(time.Second, 5*time.Second)
	case KDeploy:
		r := g.revision()
		op.Rev = &r
	case KReplay:
		op.Replay = g.pick([]string{"seq", "function", "all"}, []int{2, 1, 1})
		op.Pick = g.rng.IntN(1 << 20)
	}
	return op
}

func (g *generator) family() Family {
	if g.rng.IntN(2) == 0 {
		return Remote
	}
	return Recording
}

// revision draws a random valid revision: mostly the base, with each
// setting changed now and then.
func (g *generator) revision() Revision {
	r := baseRevision()
	for _, f := range []*fnRev{&r.Remote, &r.Recording} {
		f.Present = !g.chance(WRemove)
		f.AckWait = ackWaits[g.rng.IntN(len(ackWaits))]
		f.Concurrency = []int{1, 2, 4}[g.rng.IntN(3)]
		// The recording function is keyed: its durable names its router's
		// and partitions' consumers, so it is never renamed (see
		// fnRev.Durable). The chance is still drawn, so a seed's schedule
		// stays what it was before the function was keyed.
		if g.chance(WRenameDurable) && f == &r.Remote {
			f.Durable = f.Name + "-2"
		}
	}
	if g.chance(WRenameFunction) {
		r.Remote.Name = remoteRenamed
	}
	if g.chance(WNarrow) {
		r.Remote.Filter = remoteFilters[1+g.rng.IntN(len(remoteFilters)-1)]
	}
	if g.chance(WNarrow) {
		r.Recording.Filter = recordingFilters[1+g.rng.IntN(len(recordingFilters)-1)]
	}
	if !r.Remote.Present && !r.Recording.Present {
		r.Recording.Present = true
	}
	return r
}

// chance draws true with the percentage the weight of k gives.
func (g *generator) chance(k Kind) bool { return g.rng.IntN(100) < g.w[k] }

func (g *generator) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(g.rng.Int64N(int64(hi-lo)+1))
}

// pick draws one of names with the given weights.
func (g *generator) pick(names []string, weights []int) string {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := g.rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return names[i]
		}
		n -= w
	}
	panic(fmt.Sprintf("pick: %d beyond %d", n, total))
}

// Describe is the op in one line, for the history.
func (op Op) Describe() string {
	switch op.Kind {
	case KPublish:
		tab := ""
		if op.Input.Tab {
			tab = " with a TAB in a header"
		}
		return fmt.Sprintf("%s %s %s on %s%s", op.Mode, op.Input.Family, poisonName(op.Input.Poison), op.Input.Subject, tab)
	case KKillJetfn, KPauseJetfn:
		return fmt.Sprintf("jetfn-%d for %s", op.Target+1, op.For)
	case KKillNATS:
		return fmt.Sprintf("node %d for %s", op.Target+1, op.For)
	case KKillAllJetfn, KMongoOutage, KKillRemote, KPartitionRemote, KStrayStream:
		return "for " + op.For.String()
	case KDeploy:
		return op.Rev.String()
	case KDeleteConsumer, KDeleteConsumerAllDown, KDeleteStream:
		return string(op.Family)
	case KReplay:
		return op.Replay
	}
	return ""
}

func poisonName(p Poison) string {
	if p == Good {
		return "good"
	}
	return "poison/" + string(p)
}

// ParseWeights returns DefaultWeights with kind=n pairs (comma-separated)
// replacing their entries: "deploy=8,input-tab-header=0".
func ParseWeights(s string) (Weights, error) {
	w := maps.Clone(DefaultWeights)
	if s == "" {
		return w, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("weights: %q is not kind=n", kv)
		}
		w[Kind(k)] = n
	}
	return w, nil
}
