package crash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/test/crash/orderrun"
	"github.com/jetfn/jetfn/test/testkit"
)

// The ordered rows prove issue 31's per-key order on the real binary: a
// function declared ordered by a subject token is handled by `jetfn run`
// children that are SIGKILLed, joined by a second instance and left, or
// held by a key whose message fails; the checker (ordercheck.go) then wants
// every key's effects in stream order, each once. The routed rows
// (routed.go) are the same rows with the key in a header or a payload
// field, which jetfn's own router copies into the keyed stream.
//
// The function is remote: the shipped binary runs only the shipped
// functions, none keyed by a subject token, and has no test hooks, so the
// effects are recorded by a small micro service of the harness's own
// (test/crash/orderrecorder), which jetfn calls like any remote function.
// The recorder is never killed here (the remote points already kill a
// remote mid-request); jetfn is.

// The ordered rows' names, which are also their --only keys. A routed
// row (routed.go) is named ordered-routed-… after the row it varies.
const (
	orderedKillName      = "ordered-random-kill"
	orderedInstancesName = "ordered-instances"
	orderedFailingName   = "ordered-failing-key"
	routedKillName       = "ordered-routed-random-kill"
	routedInstancesName  = "ordered-routed-instances"
)

// What the ordered rows' manifest declares and the recorder uses
// (orderrecorder's constants repeat the recorder's side).
const (
	recorderPackage    = "./test/crash/orderrecorder"
	recorderService    = "order-recorder"
	recorderReady      = "order recorder ready"
	orderedFunction    = "record-order"
	ordersStream       = "ORDERS"
	recordedStream     = "RECORDED"
	recordedSubject    = "recorded.orders"
	recorderKeys       = "ordered_keys"
	recorderRuns       = orderrun.Collection
	orderedPartitions  = 8
	orderedConcurrency = 4
	orderedMaxDeliver  = 10
)

// OrderedKeying is the keying of the ordered rows' function: one message
// of a key at a time, in order. Another value replaces this line, so a
// row can be run as a control that must fail: "keyConcurrency: 4" lets
// four messages of a key run at once, and "none" declares no key at all.
const OrderedKeying = "ordered: true"

// orderedManifestTemplate binds the ordered rows' function alone, a remote
// reading orders.<key>; the verb is its keying. ackWait, timeout and
// backoff are short so that a SIGKILLed instance's messages come back in
// seconds and the failing key's retries in a fraction of one.
const orderedManifestTemplate = `# Written by the crash harness (test/crash) for one ordered row.
deadLetter:
  stream: DEADLETTER
  subjectPrefix: deadletter
streams:
  - name: ORDERS
    subjects: ["orders.*"]
    duplicates: 24h
  - name: RECORDED
    subjects: ["recorded.>"]
    duplicates: 24h
  - name: DEADLETTER
    subjects: ["deadletter.>"]
    duplicates: 24h
functions:
  - name: record-order
    version: 1.0.0
    stream: ORDERS
    subject: orders.*
%s    ackWait: 2s
    heartbeat: 1s
    maxDeliver: %d
    backoff: [200ms]
    concurrency: %d
    timeout: 2s
    remote:
      subject: recorder.record
    outputs:
      - subject: recorded.orders
        stream: RECORDED
`

// OrderedKind is what an ordered row does while its messages are handled.
type OrderedKind int

const (
	// OrderedKill SIGKILLs the one instance at random moments and restarts
	// it at once.
	OrderedKill OrderedKind = iota
	// OrderedInstances runs two instances: the second joins, the first is
	// SIGKILLed and joins again, the second leaves with a SIGTERM (it
	// drains), each at a random moment of its own quarter of the row.
	OrderedInstances
	// OrderedFailing disrupts nothing; one message of one key fails its
	// first Failures deliveries.
	OrderedFailing
)

func (k OrderedKind) String() string {
	switch k {
	case OrderedInstances:
		return orderedInstancesName
	case OrderedFailing:
		return orderedFailingName
	default:
		return orderedKillName
	}
}

// Ordered is one ordered row.
type Ordered struct {
	Kind OrderedKind
	// Keys × Messages are published at once, interleaved by key.
	Keys, Messages int
	// Kills are OrderedKill's SIGKILLs.
	Kills int
	// Failures is how many deliveries of the failing message fail; it is
	// the third message of key k00, so two are handled before it and the
	// rest of its key must wait behind it.
	Failures int
	// Keying replaces OrderedKeying in the manifest; empty keeps it.
	Keying string
	// Routed, when set, keys the function by a header (RoutedByHeader) or
	// a payload field (RoutedByField) instead of subject token 2, so that
	// jetfn's router copies the messages into the keyed stream, and the
	// row's disruptions come while it copies (routed.go).
	Routed string
	// Keyless adds to a routed row one message without its key, which the
	// router must dead-letter once, disturbing no other.
	Keyless bool
}

// name is the row's name: its kind's, or its routed variant's.
func (o Ordered) name() string {
	switch {
	case o.Routed == "":
		return o.Kind.String()
	case o.Kind == OrderedKill:
		return routedKillName
	case o.Kind == OrderedInstances:
		return routedInstancesName
	}
	return "ordered-routed-" + strings.TrimPrefix(o.Kind.String(), "ordered-")
}

func (o Ordered) point() string {
	s := fmt.Sprintf("%s (%d keys x %d", o.name(), o.Keys, o.Messages)
	if o.Keyless {
		s += " + 1 keyless"
	}
	if o.Routed != "" {
		s += ", key in " + o.routedKeyName()
	}
	switch o.Kind {
	case OrderedKill:
		s += fmt.Sprintf(", %d kills", o.Kills)
	case OrderedFailing:
		s += fmt.Sprintf(", fails %dx", o.Failures)
	}
	if o.Keying != "" && o.Keying != OrderedKeying {
		s += ", control " + o.Keying
	}
	return s + ")"
}

// keyingLines are the manifest lines of the function's keying, each
// indented under the function.
func (o Ordered) keyingLines() string {
	switch o.Keying {
	case "none":
		return ""
	case "":
		o.Keying = OrderedKeying
	}
	return fmt.Sprintf("    key: %s\n    %s\n    partitions: %d\n", o.keySource(), o.Keying, orderedPartitions)
}

func (o Ordered) keyed() bool { return o.Keying != "none" }

// failingKey and failingIndex name the failing row's failing message.
const (
	failingKey   = "k00"
	failingIndex = 2
)

// orderedEvidence is what a row saw beside the effects.
type orderedEvidence struct {
	inputs []orderInput
	// restarts are the kill row's restarts; the instances row has no
	// recovery to time, since the other instance goes on.
	restarts []time.Time
	// steps are the disruptions, each with the outputs stored when it
	// came: how far the row was.
	steps []string
	// kills counts SIGKILLs of an instance.
	kills  int
	dlFrom uint64
	// The routed rows' evidence (routed.go): the keyless message, and what
	// the watch on the router's copies and dead letters saw.
	keyless *orderInput
	routing *routingEvidence
}

// RunOrdered runs o and returns its row: one "run" per message.
func (h *Harness) RunOrdered(ctx context.Context, o Ordered) Row {
	row := Row{Point: o.point(), WantSummaries: 1, WantNotifications: 1}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ev := &orderedEvidence{}
	err := h.orderedRun(ctx, o, ev)
	err = h.stopOrdered(err)
	v, failing, cerr := h.judgeOrdered(ctx, o, ev)
	if err == nil {
		err = cerr
	}
	dead, n := h.deadLettersSince(ctx, ev.dlFrom)
	var wantDead uint64
	if ev.keyless != nil {
		wantDead = 1
	}
	if n != wantDead && err == nil {
		err = fmt.Errorf("%d messages dead-lettered, want %d", n, wantDead)
	}
	if ev.keyless != nil {
		failing += h.checkKeyless(ctx, o, ev, &row)
	}
	row.addAll(v.Results, err)
	const shown = 10
	row.Order = slices.Clone(v.Violations[:min(len(v.Violations), shown)])
	if len(v.Violations) > shown {
		row.Order = append(row.Order, fmt.Sprintf("… and %d more violations", len(v.Violations)-shown))
	}
	row.Recoveries = h.orderedRecoveries(ctx, ev.restarts)
	row.Note = fmt.Sprintf("summaries are the recorder's effects, notifications its outputs; %d keys x %d messages, "+
		"%d SIGKILLs, %s; recorder runs %d (repeats of an applied message %d, failed %d); order violations %d; dead letters %s%s%s",
		o.Keys, o.Messages, ev.kills, orNone(ev.steps), v.Runs, v.Repeats, v.Failed, len(v.Violations), dead, failing,
		ev.routing.String())
	h.opts.Log.Info("ordered", "point", row.Point, "messages", row.Runs, "violations", len(v.Violations), "err", err)
	return row
}

func orNone(steps []string) string {
	if len(steps) == 0 {
		return "no disruption"
	}
	return strings.Join(steps, ", ")
}

func (h *Harness) orderedRun(ctx context.Context, o Ordered, ev *orderedEvidence) error {
	if err := h.startRecorderRun(ctx, o.name(), fmt.Sprintf(orderedManifestTemplate, o.keyingLines(), orderedMaxDeliver, orderedConcurrency),
		manifest.KeyedStreamPrefix+orderedFunction, ordersStream, recordedStream); err != nil {
		return err
	}
	var err error
	if ev.dlFrom, err = nextSeq(ctx, h.stack.js, deadLetterStream); err != nil {
		return err
	}
	if o.Routed != "" {
		return h.routedRun(ctx, o, ev)
	}
	if ev.inputs, err = h.publishOrders(ctx, o); err != nil {
		return err
	}
	total := len(ev.inputs)
	switch o.Kind {
	case OrderedKill:
		kill := h.killDisruption(ctx, ev)
		for _, at := range randomMoments(total, o.Kills) {
			if err := h.orderedStep(ctx, ev, at, kill.name, func() error {
				if err := kill.do(); err != nil {
					return err
				}
				return kill.then()
			}); err != nil {
				return err
			}
		}
	case OrderedInstances:
		if err := h.instanceSteps(ctx, ev, total); err != nil {
			return err
		}
	}
	return h.settleOrdered(ctx, total, o.keyed())
}

// instanceSteps: a second instance joins, the first is SIGKILLed (leaves
// without a word), joins again, and the second leaves with a SIGTERM, each
// at a random moment of its quarter of the messages.
func (h *Harness) instanceSteps(ctx context.Context, ev *orderedEvidence, total int) error {
	steps := h.instanceDisruptions(ctx, ev)
	for i, s := range steps {
		lo, hi := total*i/len(steps), total*(i+1)/len(steps)
		if err := h.orderedStep(ctx, ev, max(1, lo+rand.IntN(max(1, hi-lo))), s.name, s.do); err != nil {
			return err
		}
	}
	return nil
}

// disruption is one step of a row: do disrupts, then (if set) restarts.
// A routed row reads the router's state between the two.
type disruption struct {
	name string
	do   func() error
	then func() error
	// handover is set when do ends the routing instance's routing: the
	// other instance, or the restarted one, takes the router's lease.
	handover bool
	// signal, when set, is what do sends *target: a routed row sends it
	// the moment it sees its copy, and do sends it again (SIGKILL, or a
	// SIGTERM jetfn ignores once draining) and waits for the exit.
	signal syscall.Signal
	target **testkit.Child
}

// instanceDisruptions are the instances row's four steps.
func (h *Harness) instanceDisruptions(ctx context.Context, ev *orderedEvidence) []disruption {
	return []disruption{
		{name: "second joins", do: func() error { return h.startPeer(ctx) }},
		{name: "first SIGKILLed", do: func() error { h.killChild(); ev.kills++; return nil }, handover: true,
			signal: syscall.SIGKILL, target: &h.child},
		{name: "first joins again", do: func() error { _, err := h.startChild(ctx); return err }},
		{name: "second SIGTERMed", do: func() error { return stopProcess(&h.peer) }, handover: true,
			signal: syscall.SIGTERM, target: &h.peer},
	}
}

// killDisruption is the kill row's step: a SIGKILL, then a restart.
func (h *Harness) killDisruption(ctx context.Context, ev *orderedEvidence) disruption {
	return disruption{name: "kill", do: func() error { h.killChild(); ev.kills++; return nil }, handover: true,
		signal: syscall.SIGKILL, target: &h.child,
		then: func() error {
			restart, err := h.startChild(ctx)
			ev.restarts = append(ev.restarts, restart)
			return err
		}}
}

// randomMoments are n uniformly random output counts in [1, total), in
// ascending order: when to disrupt.
func randomMoments(total, n int) []int {
	at := make([]int, n)
	for i := range at {
		at[i] = 1 + rand.IntN(max(1, total-1))
	}
	slices.Sort(at)
	return at
}

// orderedStep waits until at least at outputs are stored, then does the
// step and notes how many were stored at it.
func (h *Harness) orderedStep(ctx context.Context, ev *orderedEvidence, at int, name string, do func() error) error {
	n, err := h.awaitHandled(ctx, at)
	if err != nil {
		return err
	}
	h.opts.Log.Info("ordered step", "step", name, "outputs", n)
	ev.steps = append(ev.steps, fmt.Sprintf("%s after %d outputs", name, n))
	return do()
}

// handled is how many outputs RECORDED holds: the messages handled so far.
func (h *Harness) handled(ctx context.Context) (int, error) {
	s, err := h.stack.js.Stream(ctx, recordedStream)
	if err != nil {
		return 0, err
	}
	return int(s.CachedInfo().State.Msgs), nil
}

// awaitHandled polls until at least n messages are handled and returns
// the count it saw. No new output for a minute is a stall.
func (h *Harness) awaitHandled(ctx context.Context, n int) (int, error) {
	seen, progress := -1, time.Now()
	var stalled bool
	err := testkit.Poll(ctx, 5*time.Millisecond, fmt.Sprintf("%d outputs", n), func(ctx context.Context) bool {
		got, err := h.handled(ctx)
		if err != nil {
			return false
		}
		if got != seen {
			seen, progress = got, time.Now()
		}
		stalled = time.Since(progress) > time.Minute
		return got >= n || stalled
	})
	if err == nil && stalled {
		err = fmt.Errorf("no new output for a minute at %d of the %d wanted", seen, n)
	}
	return seen, err
}

// settleOrdered waits until every message has its output and the function
// has acknowledged everything: its keyed stream is empty (work queue), or
// for the unkeyed control its consumer has nothing pending.
func (h *Harness) settleOrdered(ctx context.Context, total int, keyed bool) error {
	if _, err := h.awaitHandled(ctx, total); err != nil {
		return err
	}
	keyedStream := manifest.KeyedStreamPrefix + orderedFunction
	return testkit.Poll(ctx, 20*time.Millisecond, "every message acknowledged", func(ctx context.Context) bool {
		if !keyed {
			info, err := durableInfo(ctx, h.stack.js, ordersStream, orderedFunction)
			return err == nil && settled(info)
		}
		s, err := h.stack.js.Stream(ctx, keyedStream)
		return err == nil && s.CachedInfo().State.Msgs == 0
	})
}

// startRecorderRun starts a run of a row whose function is the order
// recorder: it writes the run's manifest, deletes the streams an earlier
// row left (so the row starts at sequence 1 with no consumer, and the
// child creates them again), and starts the recorder and jetfn.
func (h *Harness) startRecorderRun(ctx context.Context, name, manifestText string, streams ...string) error {
	h.nextRun(name)
	if err := os.WriteFile(h.manPath, []byte(manifestText), 0o644); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	if err := h.freshStreams(ctx, streams...); err != nil {
		return err
	}
	if err := h.startRecorder(ctx); err != nil {
		return err
	}
	_, err := h.startChild(ctx)
	return err
}

// freshStreams deletes the named streams, those that exist.
func (h *Harness) freshStreams(ctx context.Context, names ...string) error {
	for _, name := range names {
		err := testkit.Retry(ctx, readWithin, "deleting stream "+name, func(ctx context.Context) error {
			err := h.stack.js.DeleteStream(ctx, name)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// orderMsg is one message of an ordered row, before it is published.
type orderMsg struct {
	key, subject, id string
	data             []byte
	header           nats.Header
}

// orderMessages are a row's Keys × Messages messages, message i of every
// key before message i+1 of any, each with a message ID of its own; the
// failing row's failing message asks the recorder to fail its first
// deliveries. A routed row's messages carry their key in header Order-Key
// and in payload field "key" both (so the header and field variants store
// the same bytes), on a subject whose token 2 is not their key; its keyless
// message, in the middle, has neither.
func (h *Harness) orderMessages(o Ordered) []orderMsg {
	var msgs []orderMsg
	for i := range o.Messages {
		for k := range o.Keys {
			key := fmt.Sprintf("k%02d", k)
			m := orderMsg{key: key, subject: "orders." + key, id: fmt.Sprintf("r%03d-%s-%03d", h.runs, key, i),
				data: fmt.Appendf(nil, `{"i":%d}`, i)}
			if o.Kind == OrderedFailing && key == failingKey && i == failingIndex {
				m.data = fmt.Appendf(nil, `{"i":%d,"fail":%d}`, i, o.Failures)
			}
			if o.Routed != "" {
				m.subject = fmt.Sprintf("orders.s%02d", (k+i)%o.Keys)
				m.data = append(m.data[:len(m.data)-1], fmt.Sprintf(`,%q:%q}`, orderKeyField, key)...)
				m.header = nats.Header{orderKeyHeader: []string{key}}
			}
			msgs = append(msgs, m)
		}
	}
	if o.Keyless {
		m := orderMsg{subject: "orders.s00", id: fmt.Sprintf("r%03d-keyless", h.runs), data: []byte(`{"keyless":true}`)}
		msgs = slices.Insert(msgs, len(msgs)/2, m)
	}
	return msgs
}

// publishOrders publishes all of a row's messages (orderMessages).
func (h *Harness) publishOrders(ctx context.Context, o Ordered) ([]orderInput, error) {
	var inputs []orderInput
	for _, m := range h.orderMessages(o) {
		in, err := h.publishOrder(ctx, m)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, in)
	}
	return inputs, nil
}

// publishOrder publishes one message of a row with its message ID.
func (h *Harness) publishOrder(ctx context.Context, m orderMsg) (orderInput, error) {
	msg := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{}}
	for k, v := range m.header {
		msg.Header[k] = v
	}
	msg.Header.Set(jetstream.MsgIDHeader, m.id)
	var ack *jetstream.PubAck
	err := retry(ctx, func() error {
		var err error
		ack, err = h.stack.js.PublishMsg(ctx, msg)
		return err
	})
	if err != nil {
		return orderInput{}, fmt.Errorf("publishing %s: %w", m.subject, err)
	}
	return orderInput{Key: m.key, Seq: int64(ack.Sequence), MsgID: m.id}, nil
}

// stopOrdered stops both instances and the recorder gracefully and returns
// the run's error, or the first stop's.
func (h *Harness) stopOrdered(err error) error {
	for _, stop := range []func() error{func() error { return stopProcess(&h.peer) }, h.stopChild,
		func() error { return stopProcess(&h.recorder) }} {
		if stopErr := stop(); err == nil {
			err = stopErr
		}
	}
	return err
}

// judgeOrdered reads the effects and checks them; for the failing row it
// also checks and describes the failing message's runs.
func (h *Harness) judgeOrdered(ctx context.Context, o Ordered, ev *orderedEvidence) (orderVerdict, string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	e, err := h.orderedEffects(ctx)
	if err != nil {
		return orderVerdict{}, "", fmt.Errorf("reading the effects: %w", err)
	}
	v := checkOrder(orderedFunction, ev.inputs, e)
	if o.Kind != OrderedFailing {
		return v, "", nil
	}
	note, err := failingEvidence(o, ev.inputs, e)
	return v, note, err
}

// failingEvidence checks that the failing message failed exactly its
// deliveries before one succeeded (nothing else disrupts that row), and
// says how many messages of other keys were handled while it held its key.
func failingEvidence(o Ordered, inputs []orderInput, e orderEffects) (string, error) {
	var keySeqs []int64
	for _, in := range inputs {
		if in.Key == failingKey {
			keySeqs = append(keySeqs, in.Seq)
		}
	}
	if len(keySeqs) <= failingIndex {
		return "", fmt.Errorf("the failing row needs at least %d messages per key", failingIndex+1)
	}
	seq := keySeqs[failingIndex]
	var failed []int64
	var firstFail, success time.Time
	var okDelivery int64
	for _, r := range e.Runs {
		if r.Key != failingKey || r.Seq != seq {
			continue
		}
		if r.Failed {
			failed = append(failed, r.Delivery)
			if firstFail.IsZero() || r.At.Before(firstFail) {
				firstFail = r.At
			}
		} else if success.IsZero() || r.At.Before(success) {
			success, okDelivery = r.At, r.Delivery
		}
	}
	slices.Sort(failed)
	if len(failed) != o.Failures || success.IsZero() || okDelivery != int64(o.Failures)+1 {
		return "", fmt.Errorf("key %s seq %d: failed deliveries %v and succeeded on delivery %d, want %d failures then delivery %d",
			failingKey, seq, failed, okDelivery, o.Failures, o.Failures+1)
	}
	others := 0
	for _, out := range e.Outputs {
		if out.Key != failingKey && out.Stored.After(firstFail) && out.Stored.Before(success) {
			others++
		}
	}
	return fmt.Sprintf("; key %s seq %d failed deliveries %v, then its effect on delivery %d, %s after the first failure, "+
		"with %d outputs of other keys stored meanwhile", failingKey, seq, failed, okDelivery,
		success.Sub(firstFail).Round(time.Millisecond), others), nil
}

// orderedEffects reads the recorder's documents and the stored outputs.
func (h *Harness) orderedEffects(ctx context.Context) (orderEffects, error) {
	e := orderEffects{Applied: map[string][]int64{}}
	db := h.stack.DB(h.db)
	cur, err := db.Collection(recorderKeys).Find(ctx, bson.D{})
	if err != nil {
		return e, err
	}
	var keys []struct {
		Key  string  `bson:"_id"`
		Seqs []int64 `bson:"seqs"`
	}
	if err := cur.All(ctx, &keys); err != nil {
		return e, err
	}
	for _, k := range keys {
		e.Applied[k.Key] = k.Seqs
	}
	cur, err = db.Collection(recorderRuns).Find(ctx, bson.D{})
	if err != nil {
		return e, err
	}
	if err := cur.All(ctx, &e.Runs); err != nil {
		return e, err
	}
	msgs, err := storedMsgs(ctx, h.stack.js, recordedStream, recordedSubject, 1)
	if err != nil {
		return e, err
	}
	for _, m := range msgs {
		var d struct {
			Key string `json:"key"`
			Seq int64  `json:"seq"`
		}
		if err := json.Unmarshal(m.Data, &d); err != nil {
			return e, fmt.Errorf("output #%d: %w", m.Sequence, err)
		}
		e.Outputs = append(e.Outputs, orderOutput{Key: d.Key, Seq: d.Seq, MsgID: m.Header.Get(jetstream.MsgIDHeader), Stored: m.Time})
	}
	return e, nil
}

// orderedRecoveries is, for each restart, the time to the first output
// stored after it.
func (h *Harness) orderedRecoveries(ctx context.Context, restarts []time.Time) []time.Duration {
	if len(restarts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	msgs, err := storedMsgs(ctx, h.stack.js, recordedStream, recordedSubject, 1)
	if err != nil {
		return nil
	}
	var out []time.Duration
	for _, r := range restarts {
		for _, m := range msgs {
			if d := m.Time.Sub(r); d >= 0 {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// deadLettersSince counts the dead letters stored from sequence from on,
// and says the count, or "?" when it cannot be read.
func (h *Harness) deadLettersSince(ctx context.Context, from uint64) (string, uint64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	next, err := nextSeq(ctx, h.stack.js, deadLetterStream)
	if err != nil || from == 0 {
		return "?", 0
	}
	return fmt.Sprint(next - from), next - from
}

// startPeer starts a second `jetfn run` with the child's manifest and
// database, through the same proxy, and waits until it is bound.
func (h *Harness) startPeer(ctx context.Context) error {
	if h.peer != nil {
		return errors.New("a second instance is already running")
	}
	c, err := testkit.StartChild(h.bin, testkit.ChildEnv{
		NATSURL: h.proxy.URL(), MongoURI: h.stack.ChildMongoURI(), MongoDatabase: h.db, Manifest: h.manPath, Args: h.args,
	}, h.logPath+".peer")
	if err != nil {
		return err
	}
	h.peer = c
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.Ready(readyCtx)
}

// startRecorder starts the order recorder with the run's database, straight
// to NATS and through the relay to Mongo, and waits until its service
// answers a ping. The binary is built on the first call.
func (h *Harness) startRecorder(ctx context.Context) error {
	if h.recorderBin == "" {
		bin, err := testkit.BuildPackage(ctx, recorderPackage, filepath.Join(h.dir, "orderrecorder"), h.opts.BuildFlags...)
		if err != nil {
			return err
		}
		h.recorderBin = bin
	}
	if h.recorder != nil {
		return errors.New("a recorder is already running")
	}
	env := []string{"NATS_URL=" + h.stack.NATSURL(), "MONGO_URI=" + h.stack.ChildMongoURI(), "MONGO_DATABASE=" + h.db,
		"PATH=" + os.Getenv("PATH")}
	c, err := testkit.StartProcess(h.recorderBin, nil, env, h.logPath+".recorder", recorderReady)
	if err != nil {
		return err
	}
	h.recorder = c
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		return err
	}
	return testkit.Poll(ctx, 20*time.Millisecond, "the recorder's micro service", func(context.Context) bool {
		_, err := h.stack.nc.Request("$SRV.PING."+recorderService, nil, 500*time.Millisecond)
		return err == nil
	})
}
