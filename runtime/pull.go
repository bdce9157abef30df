package runtime

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pullWait is how long one pull request stays open on the server. It bounds
// how long a drain waits for the last pull to end, and, since an expired
// request reports how many messages it did not deliver, how long credits of
// a request that found nothing stay out.
const pullWait = time.Second

// pullHeartbeat is the idle heartbeat a pull request asks for: while it
// waits for messages the server says so this often, so a pull that went
// quiet (its request or its replies lost) is noticed and its credits
// reclaimed.
const pullHeartbeat = pullWait / 4

// pullQuiet is how long outstanding requests may go without any message,
// heartbeat or status before the puller gives them up: four heartbeats,
// about as long as a pull's wait, so a consumer leader that vanished with
// the requests it held stalls the function no longer than a Fetch did.
const pullQuiet = 4 * pullHeartbeat

// puller pulls a binding's messages on one long-lived subscription, as
// nats.go's Consume does inside, but every request asks for exactly the
// credits it took (credits.take), so the process never holds more than the
// binding's limit. Requests go to $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>
// with the subscription's inbox as reply subject; the server answers with
// the messages, then, for a request it did not fill, a 408 (expired) or 409
// status whose Nats-Pending-Messages says how many credits to return.
type puller struct {
	b        *binding
	nc       *nats.Conn
	subject  string
	inbox    string
	sub      *nats.Subscription
	closed   chan struct{}
	credits  *credits
	handoff  *handoff
	stopping context.Context
	// lastHeard is when the subscription last received anything (a
	// monotonic instant, monoNow); the watch gives up requests that went
	// quiet.
	lastHeard atomic.Int64
	// pauseUntil delays the next request after a refusal (unix
	// nanoseconds), so a missing consumer is not asked in a hot loop.
	pauseUntil atomic.Int64
	// doubted is set when the requests were given up (the consumer may be
	// gone, and made again by someone else): the next request waits until
	// the consumer is confirmed (confirm).
	doubted atomic.Bool
	request []byte
}

// newPuller subscribes the binding's inbox. stopping is the binding's run
// context: messages that arrive after it ended are returned at once.
func newPuller(stopping context.Context, b *binding, w *workers) (*puller, error) {
	nc := b.js.Conn()
	p := &puller{b: b, nc: nc, inbox: nc.NewInbox(), closed: make(chan struct{}),
		subject: jetstream.DefaultAPIPrefix + "CONSUMER.MSG.NEXT." + b.spec.Stream + "." + b.spec.Durable,
		credits: w.credits, handoff: w.handoff, stopping: stopping}
	p.lastHeard.Store(monoNow())
	p.doubted.Store(true) // the handle may name a stream looked up before its consumer was found
	sub, err := nc.Subscribe(p.inbox, p.receive)
	if err != nil {
		return nil, err
	}
	sub.SetClosedHandler(func(string) { close(p.closed) })
	p.sub = sub
	return p, nil
}

// ask sends one pull request for n messages, whose credits the caller took.
// A request that cannot be sent returns them.
func (p *puller) ask(ctx context.Context, n int) {
	if until := p.pauseUntil.Load(); until > 0 {
		pause(ctx, time.Until(time.Unix(0, until)))
		p.pauseUntil.Store(0)
	}
	if !p.confirm(ctx, n) {
		p.credits.giveBack(n)
		return
	}
	p.request = append(p.request[:0], `{"batch":`...)
	p.request = strconv.AppendInt(p.request, int64(n), 10)
	p.request = append(p.request, `,"expires":`...)
	p.request = strconv.AppendInt(p.request, int64(pullWait), 10)
	p.request = append(p.request, `,"idle_heartbeat":`...)
	p.request = strconv.AppendInt(p.request, int64(pullHeartbeat), 10)
	p.request = append(p.request, '}')
	if p.credits.outstandingCount() == n {
		// Nothing was outstanding: the quiet clock starts now, not at the
		// last reply of a pull that ended normally.
		p.lastHeard.Store(monoNow())
	}
	if err := p.nc.PublishRequest(p.subject, p.inbox, p.request); err != nil {
		p.credits.giveBack(n)
		p.b.log.Warn("pulling messages", "err", err)
		p.b.consumer.check()
		pause(ctx, pullWait)
	}
}

// confirm makes sure, before a request for n messages, that the consumer
// it reaches by name is the one whose stream incarnation names what it
// delivers: a consumer made again by another instance, after an operator
// deleted the stream, answers requests by the same name, and its messages
// named by the old incarnation would pass for the old messages of the same
// sequences (opscheck seed 20261218: one input handled under both
// identities). It asks the server when the requests were given up (a
// deleted consumer answers 409), and when none was open for longer than
// streamDeleteSettle: jetfn makes a deleted stream's consumer again no
// sooner than that, so an instance that had a request open all along
// heard of the deletion. False when the consumer is not there (the watch
// is asked to look; the request waits a pull's wait).
func (p *puller) confirm(ctx context.Context, n int) bool {
	unheard := p.credits.outstandingCount() == n && time.Duration(monoNow()-p.lastHeard.Load()) > streamDeleteSettle
	if !p.doubted.Load() && !unheard || p.b.consumer == nil {
		return true
	}
	infoCtx, cancel := context.WithTimeout(ctx, consumerInfoTimeout)
	defer cancel()
	if _, err := p.b.consumer.refresh(infoCtx); err != nil {
		p.b.consumer.check()
		pause(ctx, pullWait)
		return false
	}
	p.doubted.Store(false)
	return true
}

// status reads one status reply. 100 is an idle heartbeat; 408 (the request
// expired) and most 409s say how many of its messages the request did not
// deliver. A leadership change, a deleted consumer or a server shutdown
// ends every waiting request; no responders means the consumer is gone.
func (p *puller) status(m *nats.Msg) {
	code, descr := m.Header.Get("Status"), strings.ToLower(m.Header.Get("Description"))
	switch {
	case code == "100":
	case code == "408" || code == "409" && m.Header.Get("Nats-Pending-Messages") != "":
		n, err := strconv.Atoi(m.Header.Get("Nats-Pending-Messages"))
		if err != nil {
			p.giveUp("unreadable Nats-Pending-Messages "+m.Header.Get("Nats-Pending-Messages"), false)
			return
		}
		p.credits.giveBack(n)
	case code == "409" && (strings.Contains(descr, "leadership change") || strings.Contains(descr, "server shutdown")):
		// The next request reaches the new leader: no pause.
		p.credits.giveBack(p.credits.outstandingCount())
	default:
		p.giveUp(code+" "+m.Header.Get("Description"), true)
	}
}

// giveUp returns the credits of every outstanding request, asks the
// consumer watch to look (the consumer may be gone) and, when slow is set,
// delays the next request by a pull's wait.
func (p *puller) giveUp(why string, slow bool) {
	p.b.log.Warn("pulling messages", "err", errors.New(why))
	p.doubted.Store(true)
	p.b.consumer.check()
	if slow {
		p.pauseUntil.Store(time.Now().Add(pullWait).UnixNano())
	}
	p.credits.giveBack(p.credits.outstandingCount())
}

// watch gives up requests that went quiet, until ctx is done: after a
// reconnect at once (the server that held them may be gone, as when the
// consumer leader's node stops with this client connected to it), else
// after pullQuiet without a heartbeat (a request or its replies lost).
func (p *puller) watch(ctx context.Context) {
	t := time.NewTicker(pullHeartbeat / 2)
	defer t.Stop()
	reconnects := p.nc.Stats().Reconnects
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A receive waiting for a worker holds back the replies behind
		// it, heartbeats and statuses too (the handoff, delivery.go).
		p.handoff.release()
		if p.credits.outstandingCount() == 0 {
			reconnects = p.nc.Stats().Reconnects
			continue
		}
		quiet := time.Duration(monoNow() - p.lastHeard.Load())
		switch {
		case p.nc.Stats().Reconnects != reconnects:
			reconnects = p.nc.Stats().Reconnects
			p.giveUp("reconnected; pull requests sent before are lost", false)
		case quiet > pullQuiet:
			p.giveUp("no reply to pull requests for "+quiet.Round(time.Millisecond).String(), false)
		}
	}
}

// stop waits until no request is outstanding (at most a pull's wait and its
// quiet margin: the server ends every request by then), then unsubscribes
// and waits for the subscription's last callback, so nothing reaches the
// buffer after it. What arrives meanwhile goes straight back.
func (p *puller) stop() {
	p.credits.awaitNoOutstanding(pullQuiet)
	if err := p.sub.Unsubscribe(); err != nil {
		// A closed connection closed the subscription too; its last
		// callback may still run, so wait for it all the same.
		p.b.log.Warn("ending the pull subscription", "err", err)
	}
	select {
	case <-p.closed:
	case <-time.After(pullWait):
		p.b.log.Warn("pull subscription did not close")
	}
}
