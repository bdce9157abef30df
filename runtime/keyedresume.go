package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
)

// A keyed function pruned and added back resumes where it got to, as any
// function's consumer does (positions.go), although what it read from is
// gone: --prune deletes its keyed stream, with its partition consumers and
// its router's consumer. So before deleting them jetfn records the
// function's handled floor on its input (keyedHandledFloor) in the
// positions bucket, under the keyed stream's name; the keyed stream's
// source (a subject-token key) or the router's consumer (a header or field
// key) made again starts just after it. Without the record both started
// where the manifest's start says, by default at the input's first
// message: every message handled again.

// lookupByTimeTimeout bounds storedBefore's request, as nats.go's default
// bounds the JetStream API requests it makes itself.
const lookupByTimeTimeout = 5 * time.Second

// keyedSlot is where a keyed function's handled floor is recorded: the
// durable of its positions key. No consumer is named after a keyed stream.
func keyedSlot(f manifest.FunctionSpec) string { return f.KeyedStreamName() }

// recordKeyedFloor records removed keyed function f's handled floor on its
// input, before its keyed stream is deleted. A failure is logged: the
// function added back then starts as its manifest says.
func (r *Runtime) recordKeyedFloor(ctx context.Context, f manifest.FunctionSpec) {
	log := r.opts.log.With("function", f.Name)
	input, err := r.js.Stream(ctx, f.Stream)
	if err != nil {
		log.Warn("recording how far a pruned keyed function got: looking up its input", "err", err)
		return
	}
	floor, ok, err := keyedHandledFloor(ctx, r.js, input, f)
	if err != nil {
		log.Warn("recording how far a pruned keyed function got; added back, it will start as its manifest says", "err", err)
		return
	}
	if !ok {
		return // it copied nothing: added back, it starts as its manifest says
	}
	r.positions.record(ctx, position{Function: f.Name, Stream: f.Stream, StreamIdentity: StreamIdentity(input.CachedInfo().Created),
		Durable: keyedSlot(f), AckFloor: floor}, false)
	log.Info("recorded how far a pruned keyed function got: added back, it resumes after it", "input", f.Stream, "handled_floor", floor)
}

// keyedHandledFloor is the input sequence up to which f handled every
// message its keyed stream received, false when it received none. Copies
// are stored in input order, so it is just before the first copy still
// waiting; with none waiting, the last message copied: for a router, its
// consumer's ack floor (the router acknowledges a message once its copy is
// stored); for the server's source, the input's last message stored
// before the keyed stream's last copy.
func keyedHandledFloor(ctx context.Context, js jetstream.JetStream, input jetstream.Stream, f manifest.FunctionSpec) (uint64, bool, error) {
	ks, err := js.Stream(ctx, f.KeyedStreamName())
	if err != nil {
		return 0, false, err
	}
	router := ""
	if f.IsRouted() {
		router = f.RouterDurable()
	}
	return handledThrough(ctx, js, input, ks, router)
}

// handledThrough is keyedHandledFloor for keyed stream ks, filled by the
// router whose consumer on input is named router, or by the server's
// source when router is empty.
func handledThrough(ctx context.Context, js jetstream.JetStream, input, ks jetstream.Stream, router string) (uint64, bool, error) {
	floor, waiting, err := beforeFirstWaiting(ctx, ks)
	if err != nil || waiting {
		return floor, waiting, err
	}
	if router != "" {
		c, err := input.Consumer(ctx, router)
		if err != nil {
			return 0, false, err
		}
		floor := c.CachedInfo().AckFloor.Stream
		return floor, floor > 0, nil
	}
	last := ks.CachedInfo().State
	if last.LastSeq == 0 {
		return 0, false, nil
	}
	floor, err = storedBefore(ctx, js, input, last.LastTime)
	return floor, err == nil, err
}

// beforeFirstWaiting is the input sequence just before the origin of
// keyed stream ks's first stored copy, and whether it holds one. Another
// instance may settle that copy meanwhile, so it looks again a few times.
func beforeFirstWaiting(ctx context.Context, ks jetstream.Stream) (uint64, bool, error) {
	for range 5 {
		info, err := ks.Info(ctx)
		if err != nil {
			return 0, false, err
		}
		if info.State.Msgs == 0 {
			return 0, false, nil
		}
		m, err := ks.GetMsg(ctx, info.State.FirstSeq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		origin, _, err := originOf(m.Header)
		if err != nil {
			return 0, false, fmt.Errorf("keyed stream message %d: %w", m.Sequence, err)
		}
		return origin.seq - 1, true, nil
	}
	return 0, false, errors.New("the keyed stream's first message kept being settled while it was read")
}

// storedBefore is the sequence of input's last message stored before at:
// the server's own lookup by time (a message get with start_time, which
// nats.go does not offer) finds the first one at or after it.
func storedBefore(ctx context.Context, js jetstream.JetStream, input jetstream.Stream, at time.Time) (uint64, error) {
	// A plain request waits as long as ctx does, and one the server never
	// answers (a permission it refuses) would hold a deploy forever.
	ctx, cancel := context.WithTimeout(ctx, lookupByTimeTimeout)
	defer cancel()
	info, err := input.Info(ctx)
	if err != nil {
		return 0, err
	}
	req, _ := json.Marshal(struct {
		StartTime time.Time `json:"start_time"`
	}{at})
	msg, err := js.Conn().RequestWithContext(ctx, jetstream.DefaultAPIPrefix+"STREAM.MSG.GET."+info.Config.Name, req)
	if err != nil {
		return 0, err
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, err
	}
	switch {
	case resp.Message != nil:
		return resp.Message.Seq - 1, nil
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return info.State.LastSeq, nil // nothing stored since: all of it is before
	case resp.Error != nil:
		return 0, resp.Error
	}
	return 0, errors.New("the server's answer to a message get by time held neither a message nor an error")
}

// resumeFloor is the handled floor recorded for keyed function f when it
// was pruned, if it counts in input's present incarnation.
func resumeFloor(ctx context.Context, positions *positionStore, input jetstream.Stream, f manifest.FunctionSpec) (*knownFloor, error) {
	pos, err := positions.lookup(ctx, f.Stream, keyedSlot(f))
	if err != nil || pos == nil || pos.StreamIdentity != StreamIdentity(input.CachedInfo().Created) {
		return nil, err
	}
	return &knownFloor{floor: pos.AckFloor, from: fmt.Sprintf("handled when the function was pruned, recorded at %s",
		pos.At.Format(time.RFC3339))}, nil
}

// resumeSourceAfterPrune starts the source of a subject-token keyed
// stream that does not exist yet after the floor recorded when the
// function was pruned, if one was.
func resumeSourceAfterPrune(ctx context.Context, js jetstream.JetStream, f manifest.FunctionSpec, spec *manifest.StreamSpec,
	positions *positionStore, log *slog.Logger) error {
	if f.IsRouted() || spec.Source == nil {
		return nil
	}
	if _, err := js.Stream(ctx, spec.Name); !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err // it exists (its source keeps its start), or the lookup failed
	}
	input, err := js.Stream(ctx, f.Stream)
	if err != nil {
		return fmt.Errorf("looking up keyed function %s's input: %w", f.Name, err)
	}
	known, err := resumeFloor(ctx, positions, input, f)
	if err != nil || known == nil {
		return err
	}
	spec.Source.StartTime, spec.Source.StartSeq = nil, known.floor+1
	log.Info("a keyed function added back after a prune resumes where it got to", "function", f.Name,
		"keyed_stream", spec.Name, "resumes_after", known.floor, "from", known.from)
	return nil
}

// ensureRouterConsumer is the router's consumer spec on the input, made
// after the higher of the floor recorded when the function was pruned and
// the router's own recorded floor on the keyed stream identified by into.
// Without its own floor, a router consumer an operator deleted while every
// instance was down copied the whole input again, and past the keyed
// stream's duplicate window every message was handled again (opscheck
// seed 20261212).
func (r *Runtime) ensureRouterConsumer(ctx context.Context, input jetstream.Stream, spec manifest.FunctionSpec, into, digest string,
	log *slog.Logger) (jetstream.Consumer, error) {
	known, err := resumeFloor(ctx, r.positions, input, spec)
	if err != nil {
		return nil, err
	}
	copied, err := copiedFloor(ctx, r.positions, input, spec, into)
	if err != nil {
		return nil, err
	}
	if known == nil || copied != nil && copied.floor > known.floor {
		known = copied
	}
	return ensureConsumerAfter(ctx, input, spec, digest, log, nil, known)
}

// copiedFloor is the floor the router of keyed function f (spec is its
// consumer's) recorded on input's present incarnation while copying into
// the keyed stream identified by into. A record made for another keyed
// stream (one a prune deleted, with the copies still waiting in it) counts
// for nothing: those copies are gone, and resumeFloor says what was handled.
func copiedFloor(ctx context.Context, positions *positionStore, input jetstream.Stream, spec manifest.FunctionSpec, into string) (*knownFloor, error) {
	pos, err := positions.lookupOn(ctx, StreamIdentity(input.CachedInfo().Created), consumerKey(spec.Stream, spec.Durable))
	if err != nil || pos == nil || into == "" || pos.Into != into {
		return nil, err
	}
	return &knownFloor{floor: pos.AckFloor, from: fmt.Sprintf("copied into the keyed stream, recorded for consumer %s at %s",
		pos.Durable, pos.At.Format(time.RFC3339))}, nil
}
