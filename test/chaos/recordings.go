package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
)

// The recording schedule: each recording is the nine lifecycle events,
// published in bursts of burstSize back to back, and openRecordings
// recordings are under way at once, their bursts taking turns. A burst
// puts several events of one recording into the stream within
// milliseconds, so a function that let two of them run at once would have
// them in flight together.
const (
	burstSize      = 3
	openRecordings = 4
)

// deletedReason is the reason every recording's deleted event carries
// (the contract requires one).
const deletedReason = "retention period ended"

// RecordingPublication is one recording event as the recording publisher
// saw it.
type RecordingPublication struct {
	Event events.RecordingEvent
	// First is when the first attempt started; Acked when the stream
	// acknowledged one (zero if none did: the outcome is unknown).
	First, Acked time.Time
	// Seq is the stream sequence of the acknowledgement; Attempts counts
	// every publish, the first included.
	Seq      uint64
	Attempts int
}

// ID is the event's Nats-Msg-Id, <recordingId>:<event>:<ts>.
func (p RecordingPublication) ID() string { return p.Event.MsgID() }

// NoticeID is the Nats-Msg-Id publish-recording-event gives the event's
// notice: the event's ID scoped to the function and the notice's subject
// (jetfn.OutputMsgID), as function.go publishes it.
func (p RecordingPublication) NoticeID() string {
	id, err := jetfn.OutputMsgID(recordingFunction, events.RecordingNoticeSubject(p.Event.ConversationID), p.ID())
	if err != nil {
		panic(err) // the key is never empty
	}
	return id
}

// RecordingPublisher plays the recording backend, carefully: one
// goroutine publishes every event of Recordings recordings in order, each
// with its Nats-Msg-Id, and publishes the next only once the stream
// acknowledged the last (retrying with the same ID), so the RECORDING
// stream stores each recording's events in the order of their ts. It
// publishes a burst every Every; an event still unacknowledged after
// GiveUp stays unknown and the publisher moves on.
type RecordingPublisher struct {
	JS         jetstream.JetStream
	Recordings int
	Every      time.Duration
	GiveUp     time.Duration

	record[RecordingPublication]
}

// recordingBursts is the schedule of n recordings: bursts of one
// recording's events, in publish order (without ts: the publisher stamps
// each event as it first publishes it).
func recordingBursts(n int) [][]events.RecordingEvent {
	names := events.RecordingEventNames()
	var bursts [][]events.RecordingEvent
	for group := 0; group < n; group += openRecordings {
		for from := 0; from < len(names); from += burstSize {
			for i := group; i < min(group+openRecordings, n); i++ {
				var burst []events.RecordingEvent
				for _, name := range names[from:min(from+burstSize, len(names))] {
					ev := events.RecordingEvent{Event: name, RecordingID: fmt.Sprintf("rec-%04d", i),
						ConversationID: fmt.Sprintf("rconv-%03d", i/openRecordings)}
					if name == events.RecordingDeleted {
						ev.Reason = deletedReason
					}
					burst = append(burst, ev)
				}
				bursts = append(bursts, burst)
			}
		}
	}
	return bursts
}

// Run publishes the schedule, a burst every Every, until it is done or
// ctx is; an event being retried when ctx ends is retried to its end.
func (p *RecordingPublisher) Run(ctx context.Context) {
	tick := time.NewTicker(p.Every)
	defer tick.Stop()
	lastTS := map[string]int64{}
	for _, burst := range recordingBursts(p.Recordings) {
		for _, ev := range burst {
			if ctx.Err() != nil {
				return
			}
			ev.TS = max(time.Now().UnixMilli(), lastTS[ev.RecordingID]+1)
			lastTS[ev.RecordingID] = ev.TS
			p.publish(ctx, ev)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// publish retries one event with its message ID until the stream
// acknowledges it or GiveUp has passed.
func (p *RecordingPublisher) publish(ctx context.Context, ev events.RecordingEvent) {
	data, err := events.RecordingEventPayload.Encode(ev)
	if err != nil {
		panic(err) // the schedule's events keep the contract
	}
	pub := &RecordingPublication{Event: ev, First: time.Now()}
	p.locked(func() { p.pubs = append(p.pubs, pub) })
	publishUntilAcked(ctx, p.JS, p.GiveUp, ev.Subject(), data, ev.MsgID(), func(seq uint64) {
		p.locked(func() {
			pub.Attempts++
			if seq > 0 {
				pub.Acked, pub.Seq = time.Now(), seq
			}
		})
	})
}

// Publications copies what was published so far, in publish order.
func (p *RecordingPublisher) Publications() []RecordingPublication { return p.copies() }

// ackedCount is how many events the stream acknowledged.
func (p *RecordingPublisher) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pub := range p.pubs {
		if !pub.Acked.IsZero() {
			n++
		}
	}
	return n
}
