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

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
)

// Letter is one dead letter as stored on the dead-letter stream.
type Letter struct {
	Seq             uint64      `json:"seq"`
	Subject         string      `json:"subject"`
	Stored          time.Time   `json:"stored"`
	Function        string      `json:"function"`
	OriginalSubject string      `json:"original_subject"`
	OriginalStream  string      `json:"original_stream"`
	OriginalSeq     uint64      `json:"original_seq"`
	OriginalMsgID   string      `json:"original_msg_id,omitempty"`
	NumDelivered    uint64      `json:"num_delivered"`
	Error           string      `json:"error"`
	Header          nats.Header `json:"header,omitempty"`
	Data            []byte      `json:"data"`
}

func letterFrom(m *jetstream.RawStreamMsg) Letter {
	h := m.Header
	l := Letter{Seq: m.Sequence, Subject: m.Subject, Stored: m.Time, Header: h, Data: m.Data}
	if h == nil {
		return l
	}
	l.Function = h.Get(runtime.HeaderFunction)
	l.OriginalSubject = h.Get(runtime.HeaderOriginalSubject)
	l.OriginalStream = h.Get(runtime.HeaderOriginalStream)
	l.OriginalSeq, _ = strconv.ParseUint(h.Get(runtime.HeaderStreamSequence), 10, 64)
	l.OriginalMsgID = h.Get(runtime.HeaderOriginalMsgID)
	l.NumDelivered, _ = strconv.ParseUint(h.Get(runtime.HeaderNumDelivered), 10, 64)
	l.Error = h.Get(runtime.HeaderError)
	return l
}

// check reports a message that cannot be replayed: it lacks where it came
// from.
func (l Letter) check() error {
	if l.OriginalSubject == "" || l.OriginalStream == "" || l.OriginalSeq == 0 {
		return fmt.Errorf("message %d on %s: %w (no %s, %s or %s header)", l.Seq, l.Subject, ErrNotDeadLetter,
			runtime.HeaderOriginalSubject, runtime.HeaderOriginalStream, runtime.HeaderStreamSequence)
	}
	return nil
}

// originalID is the ID the original was published with: its own
// Nats-Msg-Id, or else <stream>:<sequence>, which names the original
// message whichever function dead-lettered it.
func (l Letter) originalID() string {
	if l.OriginalMsgID != "" {
		return l.OriginalMsgID
	}
	return l.OriginalStream + ":" + strconv.FormatUint(l.OriginalSeq, 10)
}

// replaySuffix separates a replayed message's ID from its attempt number.
const replaySuffix = ":replay:"

// baseID splits an ID made by an earlier replay, so that replaying the dead
// letter of a replay counts on (<id>:replay:2) instead of nesting
// (<id>:replay:1:replay:1). prior is 0 for an ID no replay made.
func baseID(id string) (base string, prior uint64) {
	i := strings.LastIndex(id, replaySuffix)
	if i < 0 {
		return id, 0
	}
	n, err := strconv.ParseUint(id[i+len(replaySuffix):], 10, 64)
	if err != nil || n == 0 {
		return id, 0
	}
	return id[:i], n
}

func replayID(base string, n uint64) string {
	return base + replaySuffix + strconv.FormatUint(n, 10)
}

// replayHeader is the original's header without the runtime's additions and
// the dead letter's own message ID, which the replay's ID replaces.
// Nats-Expected-* headers go too: they asserted the stream's state at the
// first publish and would refuse the replay.
func (l Letter) replayHeader(msgID string) nats.Header {
	h := nats.Header{}
	for k, v := range l.Header {
		if strings.HasPrefix(k, "Jetfn-") || strings.HasPrefix(k, "Nats-Expected-") || k == jetstream.MsgIDHeader {
			continue
		}
		h[k] = append([]string(nil), v...)
	}
	h.Set(jetstream.MsgIDHeader, msgID)
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
