package runtime

// Schedules (manifest schedule:, manifest/schedule.go): the runtime keeps
// the function's schedule message as the manifest says, and the server
// stores the ticks; process skips the ticks the manifest's missed: says
// no instance should run late.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
)

// The server's message schedule headers (nats-server scheduler.go).
const (
	scheduleHeader         = "Nats-Schedule"
	scheduleTargetHeader   = "Nats-Schedule-Target"
	scheduleTimeZoneHeader = "Nats-Schedule-Time-Zone"
	schedulerHeader        = "Nats-Scheduler"
	scheduleNextHeader     = "Nats-Schedule-Next"
)

// ensureSchedule makes f's schedule message on stream s say what the
// manifest says: it publishes a new one only when the stored one differs,
// expecting the stored one's sequence, so instances that start together
// write it once; a function whose schedule was removed has its schedule
// message replaced by one without a schedule, which ends its ticks.
func ensureSchedule(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, f manifest.FunctionSpec) error {
	if !f.HasScheduleSubject() {
		return nil // a scheduled function has one; this one never had one
	}
	subject := f.ScheduleSubject()
	for range 2 { // a second look if another instance wrote it first
		var last uint64
		stored, err := s.GetLastMsgForSubject(ctx, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return fmt.Errorf("reading the schedule of %s on %s: %w", f.Name, subject, err)
		case sameSchedule(stored.Header, f):
			return nil
		default:
			last = stored.Sequence
		}
		if f.Schedule == nil && last == 0 {
			return nil
		}
		msg := unscheduleMsg(f)
		if f.Schedule != nil {
			msg = scheduleMsg(f)
		}
		_, err = js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(last))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: keeping the schedule of %s on %s: %v", ErrServerRefused, f.Name, subject, err)
		}
		return nil
	}
	return fmt.Errorf("keeping the schedule of %s on %s: other instances kept changing it", f.Name, subject)
}

// restoreSchedule writes f's schedule message if stream s holds none,
// and says whether it did.
func restoreSchedule(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, f manifest.FunctionSpec) (bool, error) {
	_, err := s.GetLastMsgForSubject(ctx, f.ScheduleSubject())
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, err
	}
	_, err = js.PublishMsg(ctx, scheduleMsg(f), jetstream.WithExpectLastSequencePerSubject(0))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return false, nil // another instance restored it first
	}
	return err == nil, err
}

// pruneSchedule ends a removed function's ticks; a failure is logged, as
// a pruned consumer's is.
func (r *Runtime) pruneSchedule(ctx context.Context, spec manifest.FunctionSpec) {
	if _, err := r.js.PublishMsg(ctx, unscheduleMsg(spec)); err != nil {
		r.opts.log.Warn("pruning a removed function's schedule; its ticks go on until it is purged", "function", spec.Name,
			"subject", spec.ScheduleSubject(), "err", err)
	}
}

// sameSchedule says whether a stored schedule message is f's.
func sameSchedule(h nats.Header, f manifest.FunctionSpec) bool {
	if f.Schedule == nil {
		return h.Get(scheduleHeader) == ""
	}
	return h.Get(scheduleHeader) == f.Schedule.Pattern() && h.Get(scheduleTargetHeader) == f.Subject &&
		h.Get(scheduleTimeZoneHeader) == f.Schedule.TimeZone
}

// scheduleMsg is f's schedule message. Its payload is what each tick
// carries: the function and its schedule.
func scheduleMsg(f manifest.FunctionSpec) *nats.Msg {
	msg := nats.NewMsg(f.ScheduleSubject())
	msg.Header.Set(scheduleHeader, f.Schedule.Pattern())
	msg.Header.Set(scheduleTargetHeader, f.Subject)
	if f.Schedule.TimeZone != "" {
		msg.Header.Set(scheduleTimeZoneHeader, f.Schedule.TimeZone)
	}
	msg.Data, _ = json.Marshal(map[string]string{"function": f.Name, "schedule": f.Schedule.Pattern()})
	return msg
}

// unscheduleMsg ends f's ticks: a message without a schedule that rolls
// up the schedule subject, replacing the schedule message. It needs no
// more right than publishing on that subject, where a purge of it needs
// the right to purge the whole stream. (A stream that allows schedules
// allows rollups: the server turns them on with it.)
func unscheduleMsg(f manifest.FunctionSpec) *nats.Msg {
	msg := nats.NewMsg(f.ScheduleSubject())
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	msg.Data, _ = json.Marshal(map[string]any{"function": f.Name, "schedule": nil})
	return msg
}

// staleTick is staleTick for a delivery of b's.
func (b *binding) staleTick(ctx context.Context, m *nats.Msg, msg jetfn.Msg) string {
	if b.spec.Schedule == nil || !isTick(msg) {
		return ""
	}
	meta, _ := parseOwnAckReply(m.Reply, b.ackPrefix, b.spec.Stream)
	return staleTick(b.spec.Schedule, msg, meta.pending, b.attempts.begun(ctx, b.spec.Name, msg), time.Now())
}

// isTick says whether msg is a tick the server stored for a schedule,
// not a message published by hand on the function's subject.
func isTick(msg jetfn.Msg) bool { return msg.Header.Get(schedulerHeader) != "" }

// tickRunStarts records, for a tick about to run its handler for the
// first time, that it began (attemptStore.firstRun), so that its
// redelivery is completed rather than judged stale; it says whether the
// record is kept, to be removed once the tick is settled.
func (b *binding) tickRunStarts(ctx context.Context, msg jetfn.Msg) bool {
	return b.spec.Schedule != nil && isTick(msg) && b.attempts.firstRun(ctx, b.spec.Name, msg)
}

// skipTick acknowledges a tick that is not to run, and says why.
func (b *binding) skipTick(m *nats.Msg, msg jetfn.Msg, why string) {
	log := b.msgLog(msg)
	if err := reply(b.js.Conn(), m, ackBody); err != nil {
		log.Warn("acknowledging a skipped tick", "err", err)
		return
	}
	b.stats.ticksSkipped.Add(1)
	log.Info("skipped a tick", "tick", msg.Published, "why", why)
}

// staleTick says why a scheduled function's tick is not to run, or ""
// when it is: with missed: skip, a tick whose next tick is already due;
// with missed: once, one that is also followed by another message on the
// function's subject (a newer tick), so a backlog of ticks runs once, or
// one delivered again after its next tick was due. A tick whose handler
// began on an earlier delivery is never stale: that
// run may have left effects half done (a document stored, its output not
// published) that only its retry completes, so it runs, even after a
// newer tick. One whose earlier delivery died before its handler started
// is judged as a first delivery is.
func staleTick(spec *manifest.ScheduleSpec, msg jetfn.Msg, pending uint64, begun bool, now time.Time) string {
	if spec == nil || !isTick(msg) || begun {
		return ""
	}
	next, err := time.Parse(time.RFC3339Nano, msg.Header.Get(scheduleNextHeader))
	if err != nil || !now.After(next) {
		return ""
	}
	switch {
	case spec.Missed == manifest.MissedSkip:
		return "its next tick was due at " + next.Format(time.RFC3339) + " (missed: skip)"
	case pending > 0:
		return "a newer tick waits (missed: once)"
	case msg.NumDelivered > 1:
		// The newer tick, stored when it was due, was delivered while this
		// one waited to come back, and runs instead.
		return "delivered again, its handler never started, after the next tick was due at " + next.Format(time.RFC3339) + " (missed: once)"
	}
	return ""
}
