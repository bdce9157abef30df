package crash

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/wire"
)

// traceHeader is a custom header of the original, which its dead letter
// must keep.
const traceHeader, traceValue = "X-Trace", "abc"

// original is the session-ended message as published, to compare its
// dead letter with.
type original struct {
	data  []byte
	msgID string
	seq   uint64
}

// publishTraced publishes the session's session-ended with the
// transcriber's message ID and a custom header.
func publishTraced(ctx context.Context, js jetstream.JetStream, s session) (original, error) {
	data, err := json.Marshal(events.SessionEnded{
		ConversationID: s.conversationID, SessionID: s.sessionID, PublishedSegments: s.segments,
	})
	if err != nil {
		return original{}, err
	}
	o := original{data: data, msgID: events.SessionEndedKey(s.conversationID, s.sessionID)}
	msg := &nats.Msg{Subject: events.SessionEndedSubject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, o.msgID)
	msg.Header.Set(traceHeader, traceValue)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return original{}, fmt.Errorf("publishing session-ended of %s: %w", s.key(), err)
	}
	o.seq = ack.Sequence
	return o, nil
}

// compareDeadLetter lists how dl differs from what the dead letter of orig
// must be: the same bytes, the original's headers, and the runtime's.
func compareDeadLetter(dl *jetstream.RawStreamMsg, orig original) []string {
	var bad []string
	if !bytes.Equal(dl.Data, orig.data) {
		bad = append(bad, fmt.Sprintf("data %q, want the original's %q", dl.Data, orig.data))
	}
	want := map[string]string{
		traceHeader:                traceValue,
		wire.HeaderOriginalMsgID:   orig.msgID,
		wire.HeaderFunction:        functionName,
		wire.HeaderStreamSequence:  strconv.FormatUint(orig.seq, 10),
		wire.HeaderOriginalSubject: events.SessionEndedSubject,
		wire.HeaderOriginalStream:  transcriptionStream,
	}
	for _, k := range sortedKeys(want) {
		if got := dl.Header.Get(k); got != want[k] {
			bad = append(bad, fmt.Sprintf("header %s %q, want %q", k, got, want[k]))
		}
	}
	return bad
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// deadLetters reads the function's dead letters stored from sequence from on.
func deadLetters(ctx context.Context, js jetstream.JetStream, from uint64) ([]*jetstream.RawStreamMsg, error) {
	return storedMsgs(ctx, js, deadLetterStream, "deadletter."+functionName, from)
}

// watchAdvisories subscribes the harness to the function's MAX_DELIVERIES
// advisories, as evidence of when the server gave up. Listening does not
// change what the server does with the message.
func (h *Harness) watchAdvisories() (*nats.Subscription, error) {
	sub, err := h.stack.nc.SubscribeSync(maxDeliveriesSubject())
	if err == nil {
		err = h.stack.nc.FlushTimeout(5 * time.Second)
	}
	if err != nil {
		return nil, fmt.Errorf("watching max-deliveries advisories: %w", err)
	}
	return sub, nil
}

// maxDeliveriesSubject is where JetStream announces that the function's
// consumer gave up on a message.
func maxDeliveriesSubject() string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + transcriptionStream + "." + functionName
}

// advisory is the part of a MAX_DELIVERIES advisory the evidence shows.
type advisory struct {
	StreamSeq  uint64    `json:"stream_seq"`
	Deliveries uint64    `json:"deliveries"`
	Time       time.Time `json:"timestamp"`
}

// drainAdvisories describes every advisory the harness received, timed
// from the last kill.
func drainAdvisories(sub *nats.Subscription, lastKill time.Time) []string {
	var out []string
	for {
		m, err := sub.NextMsg(100 * time.Millisecond)
		if err != nil {
			return out
		}
		var a advisory
		if err := json.Unmarshal(m.Data, &a); err != nil {
			out = append(out, fmt.Sprintf("unreadable advisory %q", m.Data))
			continue
		}
		out = append(out, fmt.Sprintf("stream_seq %d after %d deliveries, %.1fs after the last kill",
			a.StreamSeq, a.Deliveries, a.Time.Sub(lastKill).Seconds()))
	}
}
