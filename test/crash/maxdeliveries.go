package crash

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/test/testkit"
	"github.com/nats-io/nats.go/jetstream"
)

// exhaustName is the max-deliveries-all-down row's name, and its --only key.
const exhaustName = "max-deliveries-all-down"

// deadLetterWait bounds the wait for the dead letter once the final
// child is ready; a runtime that still holds the message dead-letters it
// within a few seconds (the advisory route took 30ms in the harness).
const deadLetterWait = 10 * time.Second

// Exhaustion is the max-deliveries-all-down row: one session whose every
// allowed delivery dies with its instance, the last one while no instance
// is up, so that when JetStream gives up on the message no jetfn instance
// is there to hear its MAX_DELIVERIES advisory, the only notice it gives.
// The row wants the child, started once more, to dead-letter the message
// anyway: exactly one dead letter, with the original's bytes and headers,
// and no summary or notification.
//
// Each run is made once per MaxDeliver value, because nats-server v2.15.2
// gives up at different moments. Its ack-wait check (consumer.go
// checkPending, hasMaxDeliveries) compares the redelivery count,
// deliveries-1, with maxDeliver, so only with maxDeliver 1 does it give up
// when the last ackWait runs out: the advisory goes out while every
// instance is down and the message is gone from the consumer (seen: the
// advisory 2.0s after the kill, ack pending 0 at the restart, no dead
// letter). With a larger maxDeliver the expired last delivery waits on the
// redelivery queue, and the server gives up only at the next pull
// (getNextMsg), which the restarted child makes after it has subscribed to
// the advisories (seen: ack pending 1 at the restart, the dead letter 30ms
// after it). The first variant is the loss; the second walks every
// delivery and holds only while the server keeps deferring.
type Exhaustion struct {
	Runs int
	// The manifest's consumer: small maxDeliver values, and an AckWait
	// scaled down so the row stays short.
	AckWait, Heartbeat time.Duration
	MaxDeliver         []int
	// Quiet is longer than AckWait, so the handler is still waiting for
	// late segments at every kill and the heartbeat is what keeps it.
	Quiet time.Duration
}

// DefaultExhaustion is the row the suite runs: maxDeliver 1 and 3, ackWait
// 2s, heartbeat 600ms and an 8s quiet period.
func DefaultExhaustion(runs int) Exhaustion {
	return Exhaustion{Runs: runs, AckWait: 2 * time.Second, Heartbeat: 600 * time.Millisecond,
		MaxDeliver: []int{1, 3}, Quiet: 8 * time.Second}
}

// Validate reports every setting that would make the row test something
// else.
func (e Exhaustion) Validate() error {
	var errs []error
	if len(e.MaxDeliver) == 0 {
		errs = append(errs, errors.New("no maxDeliver"))
	}
	for _, n := range e.MaxDeliver {
		if n < 1 {
			errs = append(errs, fmt.Errorf("maxDeliver %d is below 1", n))
		}
	}
	if e.Heartbeat <= 0 || e.Heartbeat > e.AckWait/2 {
		errs = append(errs, fmt.Errorf("heartbeat %s is not within ackWait/2 (%s)", e.Heartbeat, e.AckWait/2))
	}
	if e.Quiet <= e.AckWait {
		errs = append(errs, fmt.Errorf("quiet %s is not longer than ackWait %s", e.Quiet, e.AckWait))
	}
	return errors.Join(errs...)
}

func (e Exhaustion) consumer(maxDeliver int) consumerSettings {
	return consumerSettings{ackWait: e.AckWait, heartbeat: e.Heartbeat, maxDeliver: maxDeliver}
}

// downBetween is how long the child stays down after an earlier kill:
// longer than ackWait, so the killed delivery's ackWait (counted from its
// last heartbeat) has run out when the child comes back.
func (e Exhaustion) downBetween() time.Duration { return e.AckWait * 3 / 2 }

// downLast is how long every instance stays down after the last kill:
// well past ackWait, so the server's last ack wait runs out while no
// instance listens.
func (e Exhaustion) downLast() time.Duration { return 3 * e.AckWait }

func (e Exhaustion) timeout(maxDeliver int) time.Duration {
	perDelivery := e.downBetween() + e.AckWait + 30*time.Second // down, redelivery, start-up
	return 30*time.Second + time.Duration(maxDeliver)*perDelivery + e.downLast() + deadLetterWait
}

// RunExhaustion runs e and returns its row: one "run" per run and
// maxDeliver value.
func (h *Harness) RunExhaustion(ctx context.Context, e Exhaustion) Row {
	row := Row{Point: fmt.Sprintf("%s (maxDeliver %s, ackWait %s)", exhaustName, joinInts(e.MaxDeliver), e.AckWait),
		WantDeadLetters: 1}
	if err := e.Validate(); err != nil {
		row.Errors = append(row.Errors, err.Error())
		return row
	}
	var notes []string
	for i := range e.Runs {
		for _, maxDeliver := range e.MaxDeliver {
			if ctx.Err() != nil {
				break
			}
			notes = append(notes, h.exhaustRun(ctx, e, maxDeliver, i+1, &row))
		}
	}
	row.Note = strings.Join(notes, "; ")
	return row
}

// exhaustRun makes one run, adds it to row and returns its evidence.
func (h *Harness) exhaustRun(ctx context.Context, e Exhaustion, maxDeliver, run int, row *Row) string {
	start := time.Now()
	res, note := h.exhaustOnce(ctx, e, maxDeliver)
	res.Err = h.stopChildAfter(res.Err)
	h.opts.Log.Info("run", "point", exhaustName, "run", run, "max_deliver", maxDeliver, "summaries", res.Summaries,
		"notifications", res.Notifications, "dead_letters", res.DeadLetters, "recovery", res.Recovery,
		"err", res.Err, "took", time.Since(start).Round(time.Millisecond))
	row.add(res)
	return fmt.Sprintf("maxDeliver %d run %d: %s", maxDeliver, run, note)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " and ")
}

// exhaustOnce runs one session through every allowed delivery and returns
// what was stored, with the evidence of what the server did.
func (h *Harness) exhaustOnce(ctx context.Context, e Exhaustion, maxDeliver int) (Result, string) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout(maxDeliver))
	defer cancel()
	ev := &exhaustEvidence{}
	res, err := h.exhaustSession(ctx, e, maxDeliver, ev)
	res.Err = err
	return res, ev.String()
}

func (h *Harness) exhaustSession(ctx context.Context, e Exhaustion, maxDeliver int, ev *exhaustEvidence) (Result, error) {
	err := h.prepareManifest(exhaustName, manifestParams{window: dayWindow, quiet: e.Quiet, consumer: e.consumer(maxDeliver)})
	if err != nil {
		return Result{}, err
	}
	if _, err := h.startChild(ctx); err != nil {
		return Result{}, err
	}
	base, from, dlFrom, err := h.exhaustStart(ctx)
	if err != nil {
		return Result{}, err
	}
	adv, err := h.watchAdvisories()
	if err != nil {
		return Result{}, err
	}
	// Read at the end: with maxDeliver above 1 the advisory comes only
	// once the restarted child pulls.
	defer func() {
		ev.advisories = drainAdvisories(adv, ev.lastKill)
		_ = adv.Unsubscribe()
	}()
	s := session{conversationID: fmt.Sprintf("conv-%03d", h.runs),
		sessionID: fmt.Sprintf("exhaust-%03d-%d", h.runs, time.Now().UnixNano()), segments: segmentsPerSession}
	if err := seed(ctx, h.stack.DB(h.db), s); err != nil {
		return Result{}, err
	}
	orig, err := publishTraced(ctx, h.stack.js, s)
	if err != nil {
		return Result{}, err
	}
	restart, err := h.exhaust(ctx, e, maxDeliver, s, orig.seq, base, ev)
	if err != nil {
		return h.partial(s, from), err
	}
	return h.awaitDeadLetter(ctx, s, orig, from, dlFrom, restart, ev)
}

// exhaustStart reads where the run starts: the consumer's delivery count,
// and the next sequences of TRANSCRIPTION and DEADLETTER.
func (h *Harness) exhaustStart(ctx context.Context) (base, from, dlFrom uint64, err error) {
	var info *jetstream.ConsumerInfo
	err = testkit.Retry(ctx, readWithin, "reading the consumer", func(ctx context.Context) error {
		var rerr error
		info, rerr = consumerInfo(ctx, h.stack.js)
		return rerr
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("reading the consumer: %w", err)
	}
	if from, err = nextSeq(ctx, h.stack.js, transcriptionStream); err != nil {
		return 0, 0, 0, err
	}
	if dlFrom, err = nextSeq(ctx, h.stack.js, deadLetterStream); err != nil {
		return 0, 0, 0, err
	}
	return info.Delivered.Consumer, from, dlFrom, nil
}

// exhaust kills the child in the handler of every allowed delivery, keeps
// it down past ackWait each time and well past it after the last, and
// returns when the child was started once more.
func (h *Harness) exhaust(ctx context.Context, e Exhaustion, maxDeliver int, s session, seq, base uint64,
	ev *exhaustEvidence) (time.Time, error) {
	for n := 1; n <= maxDeliver; n++ {
		if err := h.killInDelivery(ctx, s, seq, base, n, ev); err != nil {
			return time.Time{}, err
		}
		down := e.downBetween()
		if n == maxDeliver {
			down = e.downLast()
		}
		time.Sleep(down) // the outage is the point of this row
		if n == maxDeliver {
			ev.afterOutage, _ = consumerInfo(ctx, h.stack.js)
		}
		if _, err := h.startChild(ctx); err != nil {
			return time.Time{}, err
		}
	}
	ev.restartAfter = h.child.Started.Sub(ev.lastKill)
	return h.child.Started, nil
}

// killInDelivery waits until delivery n is in the handler, kills the child
// and checks that the handler had stored nothing yet. A redelivery is in
// the handler once jetfn has recorded its run (runtime/attempts.go): one
// killed before that is not a run, and jetfn rightly runs the handler
// once more than the row allows, so the kill waits for the record.
func (h *Harness) killInDelivery(ctx context.Context, s session, seq, base uint64, n int, ev *exhaustEvidence) error {
	want := base + uint64(n)
	var info *jetstream.ConsumerInfo
	err := testkit.Poll(ctx, 5*time.Millisecond, fmt.Sprintf("delivery %d", n), func(ctx context.Context) bool {
		i, err := consumerInfo(ctx, h.stack.js)
		if err != nil || i.NumAckPending == 0 || i.Delivered.Consumer < want {
			return false
		}
		info = i
		return true
	})
	if err != nil {
		return err
	}
	if n > 1 {
		if err := awaitRunRecorded(ctx, h.stack.js, seq, n); err != nil {
			return err
		}
	}
	h.killChild()
	ev.lastKill = time.Now()
	ev.kills = append(ev.kills, strconv.FormatUint(info.Delivered.Consumer-base, 10))
	if info.Delivered.Consumer != want {
		return fmt.Errorf("kill missed its point: delivery %d was due, the consumer had made %d", n, info.Delivered.Consumer-base)
	}
	sum, err := summaries(ctx, h.stack.DB(h.db), s)
	if err != nil {
		return fmt.Errorf("counting summaries: %w", err)
	}
	if sum > 0 {
		return fmt.Errorf("kill missed its point: the handler of delivery %d had stored the summary", n)
	}
	return nil
}

// awaitRunRecorded waits until the run of delivery n of the message at
// TRANSCRIPTION sequence seq is recorded: its record counts n-1 runs (the
// first delivery's is not written down).
func awaitRunRecorded(ctx context.Context, js jetstream.JetStream, seq uint64, n int) error {
	prefix, suffix, want := functionName+"."+transcriptionStream+".", "."+strconv.FormatUint(seq, 10), strconv.Itoa(n-1)
	return testkit.Poll(ctx, 5*time.Millisecond, fmt.Sprintf("the run of delivery %d recorded", n), func(ctx context.Context) bool {
		kv, err := js.KeyValue(ctx, manifest.AttemptsBucket)
		if err != nil {
			return false
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			return false
		}
		for key := range keys.Keys() {
			if !strings.HasPrefix(key, prefix) || !strings.HasSuffix(key, suffix) {
				continue
			}
			if e, err := kv.Get(ctx, key); err == nil && string(e.Value()) == want {
				_ = keys.Stop()
				return true
			}
		}
		return false
	})
}

// awaitDeadLetter polls DEADLETTER after the final restart, then stops the
// child and counts everything the run stored.
func (h *Harness) awaitDeadLetter(ctx context.Context, s session, orig original, from, dlFrom uint64,
	restart time.Time, ev *exhaustEvidence) (Result, error) {
	waitCtx, cancel := context.WithTimeout(ctx, deadLetterWait)
	defer cancel()
	err := testkit.Poll(waitCtx, 50*time.Millisecond, "the dead letter", func(ctx context.Context) bool {
		dls, err := deadLetters(ctx, h.stack.js, dlFrom)
		return err == nil && len(dls) > 0
	})
	ev.waited = time.Since(restart).Round(100 * time.Millisecond)
	if err != nil && ctx.Err() != nil {
		return h.partial(s, from), err
	}
	// Stopped first, so a second dead letter made during the drain is counted too.
	if err := h.stopChild(); err != nil {
		return h.partial(s, from), err
	}
	var dls []*jetstream.RawStreamMsg
	err = testkit.Retry(ctx, readWithin, "reading dead letters", func(ctx context.Context) error {
		var err error
		dls, err = deadLetters(ctx, h.stack.js, dlFrom)
		return err
	})
	if err != nil {
		return h.partial(s, from), fmt.Errorf("reading dead letters: %w", err)
	}
	sum, notes, err := h.count(ctx, s, from)
	res := Result{Summaries: sum, Notifications: notes, DeadLetters: len(dls)}
	for _, dl := range dls {
		res.BadDeadLetter = append(res.BadDeadLetter, compareDeadLetter(dl, orig)...)
	}
	if len(dls) > 0 {
		res.Recovery = dls[0].Time.Sub(restart)
	}
	ev.deadLetters = len(dls)
	return res, err
}

// exhaustEvidence is what one run saw beside the counts.
type exhaustEvidence struct {
	kills        []string
	lastKill     time.Time
	restartAfter time.Duration
	advisories   []string
	afterOutage  *jetstream.ConsumerInfo
	waited       time.Duration
	deadLetters  int
}

func (ev *exhaustEvidence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "killed in deliveries %s", strings.Join(ev.kills, ", "))
	fmt.Fprintf(&b, ", final restart %.1fs after the last kill", ev.restartAfter.Seconds())
	if len(ev.advisories) == 0 {
		b.WriteString(", no MAX_DELIVERIES advisory")
	} else {
		fmt.Fprintf(&b, ", MAX_DELIVERIES advisory: %s", strings.Join(ev.advisories, ", "))
	}
	if i := ev.afterOutage; i != nil {
		fmt.Fprintf(&b, ", consumer at the final restart: ack pending %d, pending %d", i.NumAckPending, i.NumPending)
	}
	if ev.deadLetters > 0 {
		fmt.Fprintf(&b, ", dead letters %d, seen %s after the final restart", ev.deadLetters, ev.waited)
	} else {
		fmt.Fprintf(&b, ", no dead letter %s after the final restart", ev.waited)
	}
	return b.String()
}
