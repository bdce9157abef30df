package runtime

// Recent runs, for the console: every binding remembers its last wire.RunHistory
// handler runs in a ring of fixed size and answers them on its
// <function>.runs micro endpoint (manifest.RunsSubject), which every
// instance answers, so one request gathers the runs of all of them.
//
// The memory is bounded by construction: wire.RunHistory slots per function,
// each holding at most wire.MaxRunPayload bytes of the payload, maxRunText of
// the error, maxRunField of each subject and message ID, and
// wire.MaxRunOutputs outputs; MaxRunBytes is the sum. A slot's payload buffer is
// reused by the run that replaces it, so a steady flow of small messages
// allocates nothing here.
//
// The hooks in the message path are marked "console: recent runs".

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/jetfn/jetfn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
)

// The bounds of a run's text fields.
const (
	// maxRunText bounds the error; maxRunField a subject, message ID or
	// stream name.
	maxRunText  = 1 << 10
	maxRunField = 256
	// traceIDLen is a W3C trace ID in hex.
	traceIDLen = 32
)

// MaxRunBytes is the most memory one remembered run takes: its fixed
// fields plus every variable one at its bound. A function's history takes
// at most wire.RunHistory times this (about 2.4 MB), and typically little more
// than its payloads.
const MaxRunBytes = int(unsafe.Sizeof(wire.Run{})) + wire.MaxRunPayload + maxRunText + 2*maxRunField + traceIDLen +
	wire.MaxRunOutputs*(int(unsafe.Sizeof(wire.RunOutput{}))+3*maxRunField)

// ---- The ring.

// runRing is a function's last runs, oldest overwritten first.
type runRing struct {
	mu    sync.Mutex
	slots []wire.Run
	total uint64 // runs recorded; the newest is in slot (total-1) % len
}

func newRunRing(n int) *runRing { return &runRing{slots: make([]wire.Run, n)} }

// add fills the next slot, reusing the buffers of the run it replaces.
func (r *runRing) add(fill func(*wire.Run)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.slots[r.total%uint64(len(r.slots))]
	payload, outputs := s.Payload[:0], s.Outputs[:0]
	*s = wire.Run{Payload: payload, Outputs: outputs}
	fill(s)
	r.total++
}

// newest calls each for the remembered runs, newest first, until it
// returns false.
func (r *runRing) newest(each func(*wire.Run) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(r.total, uint64(len(r.slots)))
	for i := range n {
		if !each(&r.slots[(r.total-1-i)%uint64(len(r.slots))]) {
			return
		}
	}
}

// copyRun is a run that shares nothing with its slot; the payload only
// when asked.
func copyRun(s *wire.Run, payload bool) wire.Run {
	c := *s
	c.ID = strconv.FormatUint(s.StreamSeq, 10) + "." + strconv.FormatUint(s.NumDelivered, 10)
	c.Payload = nil
	if payload {
		c.Payload = append([]byte(nil), s.Payload...)
	}
	c.Outputs = append([]wire.RunOutput(nil), s.Outputs...)
	return c
}

// list is up to limit runs (all when limit is 0), newest first.
func (r *runRing) list(limit int) []wire.Run {
	out := []wire.Run{}
	r.newest(func(s *wire.Run) bool {
		out = append(out, copyRun(s, false))
		return limit <= 0 || len(out) < limit
	})
	return out
}

// find is the run with id, payload included.
func (r *runRing) find(id string) (wire.Run, bool) {
	seq, delivered, ok := parseRunID(id)
	var found wire.Run
	r.newest(func(s *wire.Run) bool {
		if ok && s.StreamSeq == seq && s.NumDelivered == delivered {
			found = copyRun(s, true)
			return false
		}
		return true
	})
	return found, found.ID != ""
}

func parseRunID(id string) (seq, delivered uint64, ok bool) {
	a, b, found := strings.Cut(id, ".")
	seq, errA := strconv.ParseUint(a, 10, 64)
	delivered, errB := strconv.ParseUint(b, 10, 64)
	return seq, delivered, found && errA == nil && errB == nil
}

// ---- Recording, from the message path.

// recordRun remembers one run that ended (settled, or abandoned) with
// herr. It decides the outcome as settle does.
func (b *binding) recordRun(d *delivery, msg jetfn.Msg, start time.Time, took time.Duration, herr error) {
	if b.runs == nil {
		return
	}
	out := decide(herr, msg.NumDelivered, &b.spec)
	outputs, dropped := d.run.outputs.take()
	b.runs.add(func(r *wire.Run) {
		r.Started, r.DurationMs, r.Outcome = start, float64(took)/float64(time.Millisecond), out.kind.String()
		r.Abandoned = errors.Is(herr, ErrHandlerTimeout)
		if herr != nil {
			r.Error = clip(herr.Error(), maxRunText)
		}
		r.Subject, r.Stream, r.StreamSeq, r.NumDelivered = clip(msg.Subject, maxRunField), b.spec.Stream, msg.StreamSequence, msg.NumDelivered
		h := nats.Header(msg.Header)
		r.MsgID, r.TraceID = clip(h.Get(jetstream.MsgIDHeader), maxRunField), traceIDOf(h.Get("traceparent"))
		r.PayloadSize = len(msg.Data)
		data := msg.Data[:min(len(msg.Data), wire.MaxRunPayload)]
		if cap(r.Payload) < len(data) {
			r.Payload = make([]byte, 0, len(data))
		}
		r.Payload = append(r.Payload, data...)
		r.Outputs, r.OutputsDropped = append(r.Outputs, outputs...), dropped
	})
}

// clip cuts s to n bytes, copying the cut so the long original is freed.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.Clone(s[:n])
}

// traceIDOf is the trace ID of a W3C traceparent (version-traceid-spanid-flags),
// or "".
func traceIDOf(traceparent string) string {
	if len(traceparent) < 3+traceIDLen || traceparent[2] != '-' {
		return ""
	}
	id := traceparent[3 : 3+traceIDLen]
	if strings.Trim(id, "0") == "" {
		return ""
	}
	return id
}

// runOutputs are the outputs one run published, for its Run. It lives in
// the run's context (runContext.outputs), so the Publisher finds it.
type runOutputs struct {
	mu      sync.Mutex
	list    []wire.RunOutput
	dropped int
}

type runOutputsKey struct{}

func (o *runOutputs) take() ([]wire.RunOutput, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.list, o.dropped
}

// noteOutput records an output the stream acknowledged on the run that
// ctx belongs to; a no-op outside a handler run.
func noteOutput(ctx context.Context, subject, msgID string, size int, ack *jetstream.PubAck) {
	o, _ := ctx.Value(runOutputsKey{}).(*runOutputs)
	if o == nil || ack == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.list) >= wire.MaxRunOutputs {
		o.dropped++
		return
	}
	o.list = append(o.list, wire.RunOutput{Subject: clip(subject, maxRunField), MsgID: clip(msgID, maxRunField),
		Stream: clip(ack.Stream, maxRunField), Seq: ack.Sequence, Size: size, Duplicate: ack.Duplicate})
}

// ---- The endpoint.

// runsEndpoint is the runs endpoint's name in the function's micro service.
const runsEndpoint = "runs"

// runsStats is the runs endpoint's data in $SRV.STATS: micro asks every
// endpoint for its data, and the status endpoint's (which asks the server
// for consumer info) must not be fetched twice per STATS request.
type runsStats struct {
	Capacity int    `json:"capacity"`
	Recorded uint64 `json:"recorded"`
}

func (b *binding) runsSummary() runsStats {
	if b.runs == nil {
		return runsStats{}
	}
	b.runs.mu.Lock()
	defer b.runs.mu.Unlock()
	return runsStats{Capacity: len(b.runs.slots), Recorded: b.runs.total}
}

// addRunsEndpoint answers RunsRequests on the function's runs subject.
// Without a queue group every instance answers, so the console gathers
// them all with one request.
func (b *binding) addRunsEndpoint(svc micro.Service, maxPayload int64) error {
	instance := svc.Info().ID
	err := svc.AddEndpoint(runsEndpoint, micro.HandlerFunc(func(req micro.Request) {
		var q wire.RunsRequest
		if len(req.Data()) > 0 && json.Unmarshal(req.Data(), &q) != nil {
			_ = req.Error("400", "the body is not a RunsRequest", nil)
			return
		}
		if err := req.Respond(b.runsReply(q, instance, maxPayload)); err != nil {
			b.log.Warn("answering a runs request", "err", err)
		}
	}), micro.WithEndpointSubject(manifest.RunsSubject(b.spec.Name)), micro.WithEndpointQueueGroupDisabled())
	if err != nil {
		return fmt.Errorf("adding runs endpoint of %s: %w", b.spec.Name, err)
	}
	return nil
}

// runsReply encodes the answer to q, leaving out the oldest runs until it
// fits in maxPayload.
func (b *binding) runsReply(q wire.RunsRequest, instance string, maxPayload int64) []byte {
	sum := b.runsSummary()
	reply := wire.RunsReply{Function: b.spec.Name, Instance: instance, Capacity: sum.Capacity, Recorded: sum.Recorded, Runs: []wire.Run{}}
	if b.runs != nil {
		if q.Run != "" {
			if r, ok := b.runs.find(q.Run); ok {
				reply.Runs = append(reply.Runs, r)
			}
		} else {
			reply.Runs = b.runs.list(q.Limit)
		}
	}
	for {
		data, _ := json.Marshal(reply)
		if int64(len(data)) <= maxPayload-1024 || len(reply.Runs) == 0 {
			return data
		}
		reply.Runs, reply.Truncated = reply.Runs[:len(reply.Runs)/2], true
	}
}
