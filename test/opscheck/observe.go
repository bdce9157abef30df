package opscheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/test/testkit"
	"github.com/jetfn/jetfn/wire"
)

// deadLetter is one message seen on the dead-letter stream.
type deadLetter struct {
	Seq        uint64
	At         time.Time
	Token      string
	Function   string
	OrigStream string
	OrigSeq    uint64
	OrigMsgID  string
	MsgID      string
	Error      string
	Delivered  string
}

func (d *deadLetter) String() string {
	return fmt.Sprintf("DEADLETTER:%d id=%s of %s %s:%d (orig id %q, %s deliveries): %s", d.Seq, d.MsgID, d.Function,
		d.OrigStream, d.OrigSeq, d.OrigMsgID, d.Delivered, d.Error)
}

// dlObserver reads every dead letter as it is stored, before `dlq replay`
// deletes it: it polls the stream's last sequence and gets each new
// message directly, so a server restart only delays it.
type dlObserver struct {
	js   jetstream.JetStream
	hist *History

	mu     sync.Mutex
	next   uint64 // the next sequence to read
	bySeq  map[uint64]*deadLetter
	missed []uint64 // gone (replayed) before it was read
}

func newDLObserver(js jetstream.JetStream, hist *History) *dlObserver {
	return &dlObserver{js: js, hist: hist, next: 1, bySeq: map[uint64]*deadLetter{}}
}

// run polls until ctx is done.
func (o *dlObserver) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		o.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll reads every message up to the stream's last sequence; it reports
// whether it got there.
func (o *dlObserver) poll(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := o.js.Stream(ctx, deadStream)
	if err != nil {
		return false
	}
	last := s.CachedInfo().State.LastSeq
	o.mu.Lock()
	defer o.mu.Unlock()
	for ; o.next <= last; o.next++ {
		m, err := s.GetMsg(ctx, o.next)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			o.missed = append(o.missed, o.next)
			continue
		}
		if err != nil {
			return false
		}
		d := letterOf(m)
		o.bySeq[d.Seq] = d
		o.hist.Add(Event{At: d.At, Op: -1, Kind: "dead-letter", Phase: Info, Token: d.Token, Detail: d.String()})
	}
	return true
}

// sync reads up to the stream's current end, or fails after a while.
func (o *dlObserver) sync(ctx context.Context) error {
	deadline := time.Now().Add(20 * time.Second)
	for !o.poll(ctx) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("reading the dead-letter stream: no answer for 20s")
		}
		time.Sleep(200 * time.Millisecond) // a retry pace, not a wait for an effect
	}
	return nil
}

func (o *dlObserver) get(seq uint64) *deadLetter {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bySeq[seq]
}

func (o *dlObserver) all() []*deadLetter {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*deadLetter, 0, len(o.bySeq))
	for seq := uint64(1); seq < o.next; seq++ {
		if d := o.bySeq[seq]; d != nil {
			out = append(out, d)
		}
	}
	return out
}

func letterOf(m *jetstream.RawStreamMsg) *deadLetter {
	h := m.Header
	d := &deadLetter{Seq: m.Sequence, At: m.Time, Token: h.Get(tokenHeader), Function: h.Get(wire.HeaderFunction),
		OrigStream: h.Get(wire.HeaderOriginalStream), OrigMsgID: h.Get(wire.HeaderOriginalMsgID),
		MsgID: h.Get(jetstream.MsgIDHeader), Error: h.Get(wire.HeaderError), Delivered: h.Get(wire.HeaderNumDelivered)}
	d.OrigSeq, _ = strconv.ParseUint(h.Get(wire.HeaderStreamSequence), 10, 64)
	if d.Token == "" {
		d.Token = tokenOfPayload(m.Data)
	}
	return d
}

// tokenOfPayload finds the token in an input's payload: a greeting's name,
// or a recording event's recordingId and ts (recordingToken).
func tokenOfPayload(data []byte) string {
	var v struct {
		Name        string `json:"name"`
		Nome        string `json:"nome"`
		RecordingID string `json:"recordingId"`
		TS          int64  `json:"ts"`
	}
	_ = json.Unmarshal(data, &v)
	return v.Name + v.Nome + recordingToken(v.RecordingID, v.TS)
}

// output is one message on the output stream.
type output struct {
	Seq   uint64
	At    time.Time
	Token string
	MsgID string
	Body  string
	// Recording is a recording notice's recordingId.
	Recording string
}

// scanOutputs reads every message of the output stream.
func scanOutputs(ctx context.Context, js jetstream.JetStream) ([]output, error) {
	var out []output
	err := testkit.EachStored(ctx, js, outStream, func(m *jetstream.RawStreamMsg) error {
		tok, rec := tokenOfOutput(m.Data)
		out = append(out, output{Seq: m.Sequence, At: m.Time, Token: tok, Recording: rec,
			MsgID: m.Header.Get(jetstream.MsgIDHeader), Body: string(m.Data)})
		return nil
	})
	return out, err
}

// tokenOfOutput: greet.done carries "hello, <token>", a recording notice
// its event's recordingId and ts (recordingToken); rec is the notice's
// recordingId.
func tokenOfOutput(data []byte) (tok, rec string) {
	var v struct {
		Greeting    string `json:"greeting"`
		RecordingID string `json:"recordingId"`
		TS          int64  `json:"ts"`
	}
	_ = json.Unmarshal(data, &v)
	return strings.TrimPrefix(v.Greeting, "hello, ") + recordingToken(v.RecordingID, v.TS), v.RecordingID
}

// document is one stored effect: a greeting (the remote's, keyed by
// Jetfn-Msg-Id) or a recording's timeline entry.
type document struct {
	ID    string
	Token string
}

// effects reads the effects of both functions: greetings, timeline
// entries, and the recordings' event counts.
type effects struct {
	docs map[string][]document
	// eventCounts is each recording's eventCount, timeline how many
	// timeline entries (distinct events) it has, countedWithoutEntry the
	// tokens of the events it counted that have no timeline entry.
	eventCounts         map[string]int
	timeline            map[string]int
	countedWithoutEntry map[string][]string
}

func scanEffects(ctx context.Context, db *mongo.Database) (*effects, error) {
	e := &effects{docs: map[string][]document{}, eventCounts: map[string]int{}, timeline: map[string]int{},
		countedWithoutEntry: map[string][]string{}}
	var greetings []struct {
		ID   string `bson:"_id"`
		Name string `bson:"name"`
	}
	if err := findAll(ctx, db.Collection("greetings"), &greetings); err != nil {
		return nil, err
	}
	for _, g := range greetings {
		e.docs[g.Name] = append(e.docs[g.Name], document{ID: g.ID, Token: g.Name})
	}
	var timeline []struct {
		ID string `bson:"_id"`
	}
	if err := findAll(ctx, db.Collection(events.RecordingEventsCollection), &timeline); err != nil {
		return nil, err
	}
	entries := map[string]bool{}
	for _, t := range timeline {
		tok, rec := timelineToken(t.ID)
		e.docs[tok] = append(e.docs[tok], document{ID: t.ID, Token: tok})
		e.timeline[rec]++
		entries[t.ID] = true
	}
	var recs []struct {
		events.Recording `bson:",inline"`
		// Counted holds "<event>:<ts>" of every event the recording
		// counted (publish-recording-event's store.go).
		Counted []string `bson:"counted"`
	}
	if err := findAll(ctx, db.Collection(events.RecordingsCollection), &recs); err != nil {
		return nil, err
	}
	for _, r := range recs {
		e.eventCounts[r.ID] = r.EventCount
		for _, key := range r.Counted {
			if id := r.ID + ":" + key; !entries[id] {
				tok, _ := timelineToken(id)
				e.countedWithoutEntry[r.ID] = append(e.countedWithoutEntry[r.ID], tok)
			}
		}
	}
	return e, nil
}

func findAll(ctx context.Context, c *mongo.Collection, into any) error {
	cur, err := c.Find(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("reading %s: %w", c.Name(), err)
	}
	return cur.All(ctx, into)
}

// timelineToken is the token of a timeline entry, whose _id is
// <recordingId>:<event>:<ts>, and its recordingId. An _id of another form
// is its own token: untraceable.
func timelineToken(id string) (tok, rec string) {
	parts := strings.Split(id, ":")
	if len(parts) != 3 {
		return id, ""
	}
	ts, err := strconv.ParseInt(parts[2], 10, 64)
	if tok = recordingToken(parts[0], ts); err != nil || tok == "" {
		return id, parts[0]
	}
	return tok, parts[0]
}
