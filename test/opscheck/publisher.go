package opscheck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publish attempts are bounded: each waits attemptTimeout for its PubAck,
// and a careful publisher gives up after carefulGiveUp.
const (
	attemptTimeout = 2 * time.Second
	carefulGiveUp  = 30 * time.Second
	retryPause     = 200 * time.Millisecond
)

// stored is what one send attempt did to the stream.
type stored int

const (
	// notStored: no stream took it (no responders).
	notStored stored = iota
	// maybeStored: no PubAck (a timeout, a lost connection).
	maybeStored
	// isStored: a PubAck for a new message.
	isStored
	// isDuplicate: a PubAck saying the stream had it already.
	isDuplicate
)

// copyRec is one send attempt that stored, or may have stored, a copy.
type copyRec struct {
	Mode     Mode
	At       time.Time // the PubAck, or the attempt's start when unknown
	Stream   string
	Seq      uint64
	Definite bool
}

// ledger is what the publishers know about every token: the input and
// every copy a send stored or may have stored.
type ledger struct {
	mu     sync.Mutex
	inputs map[string]*Input
	copies map[string][]copyRec
	// first is the token's first send attempt; acked says a PubAck
	// (stored or duplicate) proved the input reached its stream.
	first map[string]time.Time
	acked map[string]bool
	modes map[string]Mode
	order []string
}

func newLedger() *ledger {
	return &ledger{inputs: map[string]*Input{}, copies: map[string][]copyRec{},
		first: map[string]time.Time{}, acked: map[string]bool{}, modes: map[string]Mode{}}
}

func (l *ledger) sent(in *Input, mode Mode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inputs[in.Token] == nil {
		l.inputs[in.Token] = in
		l.order = append(l.order, in.Token)
		l.first[in.Token] = time.Now()
		l.modes[in.Token] = mode
	}
}

func (l *ledger) input(tok string) *Input {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inputs[tok]
}

func (l *ledger) ack(tok string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[tok] = true
}

func (l *ledger) add(tok string, c copyRec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.copies[tok] = append(l.copies[tok], c)
}

// publisher runs publish operations on its own connection.
type publisher struct {
	js   jetstream.JetStream
	hist *History
	book *ledger
}

// run sends op's input the way its mode says.
func (p *publisher) run(ctx context.Context, op Op) {
	p.book.sent(op.Input, op.Mode)
	switch op.Mode {
	case Careful, Resend:
		p.careful(ctx, op)
	case Bare:
		p.once(ctx, op, false)
	case Double:
		p.once(ctx, op, false)
		p.once(ctx, op, false)
	}
}

// careful retries with the same message ID until a PubAck or give-up.
func (p *publisher) careful(ctx context.Context, op Op) {
	deadline := time.Now().Add(carefulGiveUp)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if s := p.once(ctx, op, true); s == isStored || s == isDuplicate {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryPause):
		}
	}
	p.hist.Add(Event{Op: op.Index, Kind: string(KPublish), Phase: Fail, Token: op.Input.Token, Detail: "gave up without a PubAck"})
}

// once is one send attempt; it records what it knows in the history and
// the ledger.
func (p *publisher) once(ctx context.Context, op Op, withID bool) stored {
	tok := op.Input.Token
	start := time.Now()
	p.hist.Add(Event{At: start, Op: op.Index, Kind: string(KPublish), Phase: Invoke, Token: tok, Detail: op.Describe()})
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	ack, err := p.js.PublishMsg(actx, op.Input.Msg(withID))
	switch {
	case err == nil && ack.Duplicate:
		p.book.ack(tok)
		p.hist.Add(Event{Op: op.Index, Kind: string(KPublish), Phase: OK, Token: tok,
			Detail: fmt.Sprintf("duplicate of %s:%d", ack.Stream, ack.Sequence)})
		return isDuplicate
	case err == nil:
		p.book.ack(tok)
		p.book.add(tok, copyRec{Mode: op.Mode, At: time.Now(), Stream: ack.Stream, Seq: ack.Sequence, Definite: true})
		p.hist.Add(Event{Op: op.Index, Kind: string(KPublish), Phase: OK, Token: tok,
			Detail: fmt.Sprintf("stored %s:%d", ack.Stream, ack.Sequence)})
		return isStored
	case errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse):
		p.hist.Add(Event{Op: op.Index, Kind: string(KPublish), Phase: Fail, Token: tok, Detail: err.Error()})
		return notStored
	default:
		p.book.add(tok, copyRec{Mode: op.Mode, At: start})
		p.hist.Add(Event{Op: op.Index, Kind: string(KPublish), Phase: Info, Token: tok, Detail: err.Error()})
		return maybeStored
	}
}

// lane runs its publishes in order, each no earlier than its time.
func (p *publisher) lane(ctx context.Context, start time.Time, ops []Op) {
	for _, op := range ops {
		if !waitUntil(ctx, start.Add(op.At)) {
			return
		}
		p.run(ctx, op)
	}
}

// waitUntil sleeps until t (the schedule's time, not an effect); false if
// ctx ended first.
func waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
