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

	mu    sync.Mutex
	pubs  []*Publication
	byKey map[string]*Publication
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
	giveUp := time.NewTimer(p.GiveUp)
	defer giveUp.Stop()
	for {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		ack, err := p.JS.Publish(pctx, events.SessionEndedSubject, data, jetstream.WithMsgID(id))
		cancel()
		p.locked(func() { pub.Attempts++ })
		if err == nil {
			p.locked(func() { pub.Acked, pub.Seq = time.Now(), ack.Sequence })
			return
		}
		select {
		case <-giveUp.C:
			return
		case <-time.After(retryEvery):
		}
	}
}

func (p *Publisher) locked(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// Publications copies what was published so far.
func (p *Publisher) Publications() []Publication {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Publication, len(p.pubs))
	for i, pub := range p.pubs {
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
