package crash

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/jetfn/jetfn/test/testkit"
)

// The scheduled row proves issue 32's tick promise on the real binary: a
// function triggered by its schedule (every second, missed: once) is
// SIGKILLed in the middle of a tick, after its remote (the order recorder)
// applied the tick's effect and before the server had jetfn's ack of the
// tick (the proxy holds it), and restarted. Then every tick's effect must have happened at
// most once, in tick order, with its one output; every tick stored while
// nothing was disrupted must have run; and a tick of a disruption that did
// not run must have been passed over for a newer one that did (missed:
// once runs the newest once, late, never an older one after it).

const (
	scheduledName     = "scheduled-tick-kill"
	scheduledFunction = "record-tick"
	ticksStream       = "TICKS"
	tickSubject       = "ticks.tick" // the recorder's key is token 2: "tick"
	tickKey           = "tick"
	tickEvery         = time.Second
	// tickAckWait is the function's ack wait: a tick the killed instance
	// held comes back after it, when its next tick is due, so it is passed
	// over.
	tickAckWait = 2 * time.Second
	// ticksAfterKills is how many ticks must run after the last restart
	// before the row stops.
	ticksAfterKills = 3
)

const scheduledManifest = `# Written by the crash harness (test/crash) for the scheduled row.
deadLetter:
  stream: DEADLETTER
  subjectPrefix: deadletter
streams:
  - name: TICKS
    subjects: ["ticks.>"]
    duplicates: 24h
  - name: RECORDED
    subjects: ["recorded.>"]
    duplicates: 24h
  - name: DEADLETTER
    subjects: ["deadletter.>"]
    duplicates: 24h
functions:
  - name: record-tick
    version: 1.0.0
    stream: TICKS
    subject: ticks.tick
    schedule:
      every: 1s
      missed: once
    ackWait: 2s
    heartbeat: 1s
    maxDeliver: 10
    backoff: [200ms]
    timeout: 2s
    remote:
      subject: recorder.record
    outputs:
      - subject: recorded.orders
        stream: RECORDED
`

// disruptionWindow is when ticks may be passed over because of one kill:
// from a tick before the kill to the ticks the restarted instance finds
// waiting, and the killed one's tick that comes back after its ack wait.
type disruptionWindow struct{ from, to time.Time }

func (w disruptionWindow) holds(t time.Time) bool { return !t.Before(w.from) && !t.After(w.to) }

// RunScheduled runs the scheduled row with kills SIGKILLs, each in the
// middle of a tick: one "run" per tick.
func (h *Harness) RunScheduled(ctx context.Context, kills int) Row {
	row := Row{Point: fmt.Sprintf("%s (every %s, missed: once, %d kills mid-tick)", scheduledName, tickEvery, kills),
		WantSummaries: 1, WantNotifications: 1}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var windows []disruptionWindow
	err := h.scheduledRun(ctx, kills, &windows)
	err = h.stopOrdered(err)
	results, note, jerr := h.judgeTicks(ctx, windows)
	if err == nil {
		err = jerr
	}
	row.addAll(results, err)
	row.Note = note
	h.opts.Log.Info("scheduled", "point", row.Point, "ticks", row.Runs, "err", err)
	return row
}

// scheduledRun starts the recorder and the function, and kills the
// function in the middle of kills ticks, half of them with the tick's
// output stored and its ack held, half right after the effect, noting each
// disruption's window.
func (h *Harness) scheduledRun(ctx context.Context, kills int, windows *[]disruptionWindow) error {
	if err := h.startRecorderRun(ctx, scheduledName, scheduledManifest, ticksStream, recordedStream); err != nil {
		return err
	}
	for i := range kills {
		if err := h.freezeMidTick(ctx, i%2 == 0); err != nil {
			return err
		}
		killed := time.Now()
		h.killChild()
		restarted, err := h.startChild(ctx) // passes everything again
		if err != nil {
			return err
		}
		*windows = append(*windows, disruptionWindow{from: killed.Add(-tickEvery),
			to: restarted.Add(tickAckWait + 2*tickEvery)})
	}
	applied, err := h.appliedTicks(ctx)
	if err != nil {
		return err
	}
	return testkit.Poll(ctx, 50*time.Millisecond, fmt.Sprintf("%d ticks run after the last restart", ticksAfterKills),
		func(ctx context.Context) bool {
			now, err := h.appliedTicks(ctx)
			return err == nil && len(now) >= len(applied)+ticksAfterKills
		})
}

// freezeMidTick returns once the function is in the middle of a tick,
// with nothing more of the child reaching the server: with afterOutput,
// the tick's effect is applied and its output stored, and its ack held;
// without, the effect is applied, and the reply, the output and the ack
// may or may not have left.
func (h *Harness) freezeMidTick(ctx context.Context, afterOutput bool) error {
	if afterOutput {
		h.proxy.Set(ClassAck, Freeze)
		return testkit.Poll(ctx, time.Millisecond, "a tick's held ack", func(context.Context) bool {
			return h.proxy.Count(ClassAck, Freeze) > 0
		})
	}
	runs := h.stack.DB(h.db).Collection(recorderRuns)
	before, err := runs.CountDocuments(ctx, bson.D{})
	if err != nil {
		return err
	}
	err = testkit.Poll(ctx, time.Millisecond, "a tick's run", func(ctx context.Context) bool {
		n, err := runs.CountDocuments(ctx, bson.D{})
		return err == nil && n > before
	})
	h.proxy.Freeze()
	return err
}

// appliedTicks are the ticks whose effect the recorder applied, in the
// order it applied them.
func (h *Harness) appliedTicks(ctx context.Context) ([]int64, error) {
	e, err := h.orderedEffects(ctx)
	return e.Applied[tickKey], err
}

// judgeTicks reads the ticks the function acknowledged and their effects.
// Each tick that ran is a result with its effects and outputs counted (one
// of each wanted), and so is each tick stored outside every disruption
// (it must have run); a tick of a disruption that did not run must have
// no output and a newer tick that ran. A tick that ran after a newer one
// must be a retry (lateFirstRuns).
func (h *Harness) judgeTicks(ctx context.Context, windows []disruptionWindow) ([]Result, string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	info, err := durableInfo(ctx, h.stack.js, ticksStream, scheduledFunction)
	if err != nil {
		return nil, "", err
	}
	ticks, err := storedMsgs(ctx, h.stack.js, ticksStream, tickSubject, 1)
	if err != nil {
		return nil, "", err
	}
	e, err := h.orderedEffects(ctx)
	if err != nil {
		return nil, "", err
	}
	applied, outputs := e.Applied[tickKey], map[int64]int{}
	for _, o := range e.Outputs {
		outputs[o.Seq]++
	}
	var results []Result
	var problems []error
	passedOver, last := 0, applied[len(applied)-1:]
	for _, t := range ticks {
		seq := int64(t.Sequence)
		if t.Sequence > info.AckFloor.Stream {
			break // stored after the function stopped
		}
		ran := slices.Contains(applied, seq)
		disrupted := slices.ContainsFunc(windows, func(w disruptionWindow) bool { return w.holds(t.Time) })
		switch {
		case ran || !disrupted:
			results = append(results, Result{Summaries: count(applied, seq), Notifications: outputs[seq]})
		case outputs[seq] > 0:
			problems = append(problems, fmt.Errorf("tick %d was passed over but has %d outputs", seq, outputs[seq]))
		case len(last) == 0 || last[0] < seq:
			problems = append(problems, fmt.Errorf("tick %d was passed over, and no newer tick ran", seq))
		default:
			passedOver++
		}
	}
	problems = append(problems, lateFirstRuns(applied, e.Runs)...)
	repeats := len(e.Runs) - len(applied)
	note := fmt.Sprintf("summaries are the recorder's effects, notifications its outputs; %d ticks acknowledged, %d ran, "+
		"%d passed over in %d disruptions (missed: once), recorder runs %d (repeats of an applied tick %d)",
		len(results)+passedOver, len(applied), passedOver, len(windows), len(e.Runs), repeats)
	return results, note, errors.Join(problems...)
}

// lateFirstRuns finds the ticks whose effect was applied after a newer
// tick's on their first delivery. A tick whose handler began and did not
// finish is retried even after newer ticks ran (docs/manifest.md, "Missed
// ticks"), so a late tick is fine when the run that applied it was a
// redelivery; on its first delivery it would mean the function took ticks
// out of their order.
func lateFirstRuns(applied []int64, runs []orderRun) []error {
	var problems []error
	newest := int64(0)
	for _, seq := range applied {
		if seq >= newest { // a tick applied twice is counted as a duplicate, not here
			newest = seq
			continue
		}
		i := slices.IndexFunc(runs, func(r orderRun) bool {
			return r.Key == tickKey && r.Seq == seq && !slices.Contains(r.Before, seq)
		})
		if i < 0 || runs[i].Delivery <= 1 {
			problems = append(problems, fmt.Errorf("tick %d ran after tick %d on its first delivery: ticks out of order %v", seq, newest, applied))
		}
	}
	return problems
}

// count is how often seq stands in seqs.
func count(seqs []int64, seq int64) int {
	n := 0
	for _, s := range seqs {
		if s == seq {
			n++
		}
	}
	return n
}
