package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
)

// Letter is one dead letter as stored on the dead-letter stream.
type Letter struct {
	Seq             uint64    `json:"seq"`
	Subject         string    `json:"subject"`
	Stored          time.Time `json:"stored"`
	Function        string    `json:"function"`
	OriginalSubject string    `json:"original_subject"`
	OriginalStream  string    `json:"original_stream"`
	OriginalSeq     uint64    `json:"original_seq"`
	OriginalMsgID   string    `json:"original_msg_id,omitempty"`
	// Identity is the original's identity as the function saw it
	// (jetfn.Msg.ID); empty on a dead letter stored before jetfn recorded
	// it.
	Identity               string      `json:"identity,omitempty"`
	OriginalStreamIdentity string      `json:"original_stream_identity,omitempty"`
	NumDelivered           uint64      `json:"num_delivered"`
	Error                  string      `json:"error"`
	Header                 nats.Header `json:"header,omitempty"`
	Data                   []byte      `json:"data"`
	// PayloadOmitted is the size of a payload too large to store with the
	// dead letter, which was stored without it; 0 when Data is the payload.
	PayloadOmitted int `json:"payload_omitted,omitempty"`
}

func letterFrom(m *jetstream.RawStreamMsg) Letter {
	h := m.Header
	l := Letter{Seq: m.Sequence, Subject: m.Subject, Stored: m.Time, Header: h, Data: m.Data}
	if h == nil {
		return l
	}
	l.Function = h.Get(wire.HeaderFunction)
	l.OriginalSubject = h.Get(wire.HeaderOriginalSubject)
	l.OriginalStream = h.Get(wire.HeaderOriginalStream)
	l.OriginalSeq, _ = strconv.ParseUint(h.Get(wire.HeaderStreamSequence), 10, 64)
	l.OriginalMsgID = h.Get(wire.HeaderOriginalMsgID)
	l.Identity = h.Get(wire.HeaderMsgID)
	l.OriginalStreamIdentity = h.Get(wire.HeaderOriginalStreamIdentity)
	l.NumDelivered, _ = strconv.ParseUint(h.Get(wire.HeaderNumDelivered), 10, 64)
	l.Error = h.Get(wire.HeaderError)
	l.PayloadOmitted, _ = strconv.Atoi(h.Get(wire.HeaderPayloadOmitted))
	return l
}

// check reports a message that cannot be replayed: it lacks where it came
// from, or its payload.
func (l Letter) check() error {
	if l.OriginalSubject == "" || l.OriginalStream == "" || l.OriginalSeq == 0 {
		return fmt.Errorf("message %d on %s: %w (no %s, %s or %s header)", l.Seq, l.Subject, ErrNotDeadLetter,
			wire.HeaderOriginalSubject, wire.HeaderOriginalStream, wire.HeaderStreamSequence)
	}
	if l.PayloadOmitted > 0 {
		return fmt.Errorf("message %d on %s: %w (%d bytes); the original is message %d of stream %s, if the stream still holds it",
			l.Seq, l.Subject, ErrPayloadOmitted, l.PayloadOmitted, l.OriginalSeq, l.OriginalStream)
	}
	return nil
}

// identity is the original's identity as the function saw it, which a
// replay keeps: the recorded one, or, on a dead letter older than that
// record, what jetfn.Msg.ID gave then (the original's own Nats-Msg-Id
// without an earlier replay's suffix, else <stream>:<sequence>).
func (l Letter) identity() string {
	if l.Identity != "" {
		return l.Identity
	}
	if l.OriginalMsgID != "" {
		return baseID(l.OriginalMsgID)
	}
	return jetfn.StoredMsgID(l.OriginalStream, l.OriginalStreamIdentity, l.OriginalSeq)
}

// priorReplays is how many replays of the same original came before the
// one this dead letter records: the copy's Nats-Msg-Id counts them.
func (l Letter) priorReplays() uint64 {
	return jetfn.ReplayAttempt(l.OriginalMsgID, l.identity())
}

// baseID strips an earlier replay's ":replay:<n>" from a Nats-Msg-Id.
func baseID(id string) string {
	i := strings.LastIndex(id, ":replay:")
	if i < 0 || jetfn.ReplayAttempt(id, id[:i]) == 0 {
		return id
	}
	return id[:i]
}

// replayHeader is the original's header without the runtime's additions,
// the dead letter's own message ID and the original's server-interpreted
// headers (kept under Jetfn-Original-*: a Nats-Rollup or Nats-Incr
// replayed would act again, an expectation would refuse the copy), plus
// the replay's message ID and the identity the function is to see.
func (l Letter) replayHeader(msgID string) nats.Header {
	h := nats.Header{}
	for k, v := range l.Header {
		if strings.HasPrefix(k, "Jetfn-") || strings.HasPrefix(k, "Nats-Expected-") || k == jetstream.MsgIDHeader {
			continue
		}
		h[k] = append([]string(nil), v...)
	}
	h.Set(jetstream.MsgIDHeader, msgID)
	h.Set(jetfn.HeaderReplayOf, l.identity())
	return h
}

// Store reads and replays the dead letters of one dead-letter stream.
type Store struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	spec   manifest.DeadLetterSpec
}

// Open looks up the dead-letter stream named by spec.
func Open(ctx context.Context, js jetstream.JetStream, spec manifest.DeadLetterSpec) (*Store, error) {
	stream, err := js.Stream(ctx, spec.Stream)
	if err != nil {
		return nil, fmt.Errorf("looking up dead-letter stream %s: %w", spec.Stream, err)
	}
	return &Store{js: js, stream: stream, spec: spec}, nil
}

// List returns the dead letters in sequence order; a non-empty function
// keeps only that function's.
func (s *Store) List(ctx context.Context, function string) ([]Letter, error) {
	filter := s.spec.SubjectPrefix + ".>"
	if function != "" {
		filter = s.spec.SubjectPrefix + "." + function
	}
	var out []Letter
	for seq := uint64(1); ; {
		m, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s from sequence %d: %w", s.spec.Stream, seq, err)
		}
		out = append(out, letterFrom(m))
		seq = m.Sequence + 1
	}
}

// Get returns the dead letter at seq.
func (s *Store) Get(ctx context.Context, seq uint64) (Letter, error) {
	m, err := s.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Letter{}, fmt.Errorf("%w: %s has no message %d", ErrNotFound, s.spec.Stream, seq)
	}
	if err != nil {
		return Letter{}, fmt.Errorf("reading %s message %d: %w", s.spec.Stream, seq, err)
	}
	return letterFrom(m), nil
}
