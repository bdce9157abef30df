package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/events"
)

// publishTimeout bounds one publish attempt; retryEvery spaces the
// attempts of one session.
const (
	publishTimeout = 2 * time.Second
	retryEvery     = 250 * time.Millisecond
)

// Publication is one session-ended as the publisher saw it.
type Publication struct {
	Conversation, Session string
	// First is when the first attempt started; Acked when the stream
	// acknowledged one (zero if none did: the outcome is unknown).
	First, Acked time.Time
	// Seq is the stream sequence of the acknowledgement; Attempts counts
	// every publish, the first included.
	Seq      uint64
	Attempts int
}

// Key is the session's summary key.
func (p Publication) Key() string { return events.SummaryKey(p.Conversation, p.Session) }

// Publisher plays the transcriber: it ends one session every Every and
// publishes its session-ended with the session's message ID, retrying an
// unacknowledged publish with the same ID until the stream acknowledges it
// or GiveUp has passed. Each session retries on its own goroutine, so an
// outage does not slow the steady arrival of new sessions.
type Publisher struct {
	JS     jetstream.JetStream
	Every  time.Duration
	GiveUp time.Duration

	record[Publication]
	byKey map[string]*Publication // guarded by record's lock
	wg    sync.WaitGroup
}

// Run starts a new session every Every until ctx is done, then waits for
// every session's retries to end: those still unacknowledged after GiveUp
// stay unknown. The retries outlive ctx, as a transcriber's would outlive
// the end of new calls.
func (p *Publisher) Run(ctx context.Context) {
	tick := time.NewTicker(p.Every)
	defer tick.Stop()
	for i := 0; ; i++ {
		pub := &Publication{Conversation: fmt.Sprintf("conv-%04d", i/10), Session: fmt.Sprintf("s-%06d", i)}
		p.locked(func() {
			if p.byKey == nil {
				p.byKey = map[string]*Publication{}
			}
			p.pubs = append(p.pubs, pub)
			p.byKey[pub.Key()] = pub
		})
		p.wg.Go(func() { p.publish(ctx, pub) })
		select {
		case <-ctx.Done():
			p.wg.Wait()
			return
		case <-tick.C:
		}
	}
}

// publish retries one session-ended; the message ID makes a retry of a
// publish that was stored after all (its ack lost in a failover) a no-op.
func (p *Publisher) publish(ctx context.Context, pub *Publication) {
	data, err := json.Marshal(events.SessionEnded{ConversationID: pub.Conversation, SessionID: pub.Session})
	if err != nil {
		panic(err) // a struct of two strings always marshals
	}
	id := events.SessionEndedKey(pub.Conversation, pub.Session)
	first := time.Now()
	p.locked(func() { pub.First = first })
	publishUntilAcked(ctx, p.JS, p.GiveUp, events.SessionEndedSubject, data, id, func(seq uint64) {
		p.locked(func() {
			pub.Attempts++
			if seq > 0 {
				pub.Acked, pub.Seq = time.Now(), seq
			}
		})
	})
}

// Publications copies what was published so far.
func (p *Publisher) Publications() []Publication { return p.copies() }

// publishUntilAcked publishes data with message ID id until the stream
// acknowledges it or giveUp has passed. It calls attempted after every
// attempt, with the acknowledged sequence or 0, so each publisher records
// its attempts under its own lock.
func publishUntilAcked(ctx context.Context, js jetstream.JetStream, giveUp time.Duration, subject string, data []byte, id string, attempted func(seq uint64)) {
	deadline := time.NewTimer(giveUp)
	defer deadline.Stop()
	for {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		ack, err := js.Publish(pctx, subject, data, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			attempted(ack.Sequence)
			return
		}
		attempted(0)
		select {
		case <-deadline.C:
			return
		case <-time.After(retryEvery):
		}
	}
}

// record is a publisher's publications, guarded for the goroutines that
// publish and the checker that reads them.
type record[T any] struct {
	mu   sync.Mutex
	pubs []*T
}

func (r *record[T]) locked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// copies copies the publications so far, in publish order.
func (r *record[T]) copies() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]T, len(r.pubs))
	for i, pub := range r.pubs {
		out[i] = *pub
	}
	return out
}

// FirstAttempt is when the session with summary key was first published.
func (p *Publisher) FirstAttempt(key string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pub, ok := p.byKey[key]
	if !ok {
		return time.Time{}, false
	}
	return pub.First, true
}
