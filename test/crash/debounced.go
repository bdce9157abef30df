package crash

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/test/testkit"
)

// The debounced row proves issue 32's debounce on the real binary: the
// order recorder runs as a function debounced per key (subject token 2,
// 1s), rounds of bursts are published for every key, and jetfn is
// SIGKILLed at random moments, while a burst is published or while its
// runs come due. Then every burst's last message must have taken effect
// once, with one output; a burst split by a kill (its debouncer down past
// the period in its middle, so the part before it came due alone) may
// also have run once with a message of its own, never twice with one;
// and each key's effects must be in stream order.

const (
	debouncedName   = "debounced-random-kill"
	debouncedPeriod = time.Second
	// debouncedKeying replaces the ordered rows' keying lines.
	debouncedKeying = "    key: {token: 2}\n    debounce: 1s\n"
)

// Debounced is the debounced row: Rounds of a burst of Messages per key
// for each of Keys keys, and Kills SIGKILLs spread over them.
type Debounced struct {
	Keys, Messages, Rounds, Kills int
}

// debouncedEvidence is what the row saw beside the effects: the inputs
// of each round, by key, in publish order.
type debouncedEvidence struct {
	rounds [][]orderInput
	kills  int
	steps  []string
}

// RunDebounced runs the debounced row: one "run" per burst.
func (h *Harness) RunDebounced(ctx context.Context, d Debounced) Row {
	row := Row{Point: fmt.Sprintf("%s (%d keys x %d rounds x %d messages, debounce %s, %d kills)", debouncedName,
		d.Keys, d.Rounds, d.Messages, debouncedPeriod, d.Kills), WantSummaries: 1, WantNotifications: 1}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ev := &debouncedEvidence{}
	err := h.debouncedRun(ctx, d, ev)
	err = h.stopOrdered(err)
	results, note, jerr := h.judgeBursts(ctx, ev)
	if err == nil {
		err = jerr
	}
	row.addAll(results, err)
	row.Note = fmt.Sprintf("summaries are the recorder's effects of each burst's last message, notifications their outputs; "+
		"%d SIGKILLs (%s); %s", ev.kills, orNone(ev.steps), note)
	h.opts.Log.Info("debounced", "point", row.Point, "bursts", row.Runs, "err", err)
	return row
}

// debouncedRun publishes the rounds, killing and restarting jetfn at
// random moments: during a round's publishing, or while its runs come due.
func (h *Harness) debouncedRun(ctx context.Context, d Debounced, ev *debouncedEvidence) error {
	if err := h.startRecorderRun(ctx, debouncedName, fmt.Sprintf(orderedManifestTemplate, debouncedKeying, orderedMaxDeliver, orderedConcurrency),
		manifest.DebounceStreamPrefix+orderedFunction, ordersStream, recordedStream); err != nil {
		return err
	}
	total := d.Rounds * d.Keys * d.Messages
	kills := randomMoments(2*total, d.Kills) // the second half of the range: while runs come due
	for r := range d.Rounds {
		var inputs []orderInput
		for i := range d.Messages {
			for k := range d.Keys {
				key := fmt.Sprintf("k%02d", k)
				in, err := h.publishOrder(ctx, orderMsg{key: key, subject: "orders." + key,
					id: fmt.Sprintf("r%03d-%d-%s-%03d", h.runs, r, key, i), data: fmt.Appendf(nil, `{"round":%d,"i":%d}`, r, i)})
				if err != nil {
					return err
				}
				inputs = append(inputs, in)
				if err := h.killAt(ctx, ev, &kills, (r*d.Keys*d.Messages)+len(inputs), "while a burst is published"); err != nil {
					return err
				}
			}
		}
		ev.rounds = append(ev.rounds, inputs)
		if err := h.killAt(ctx, ev, &kills, total+(r+1)*d.Keys*d.Messages, "while the runs come due"); err != nil {
			return err
		}
		if err := h.awaitBurstsRun(ctx, inputs); err != nil {
			return err
		}
	}
	return nil
}

// killAt SIGKILLs and restarts jetfn once for every kill moment up to at.
func (h *Harness) killAt(ctx context.Context, ev *debouncedEvidence, kills *[]int, at int, when string) error {
	for len(*kills) > 0 && (*kills)[0] <= at {
		*kills = (*kills)[1:]
		if rand.IntN(2) == 0 {
			time.Sleep(rand.N(debouncedPeriod)) // a random moment of the period
		}
		h.killChild()
		ev.kills++
		ev.steps = append(ev.steps, when)
		if _, err := h.startChild(ctx); err != nil {
			return err
		}
	}
	return nil
}

// awaitBurstsRun waits until every key's last message of the round has
// taken effect.
func (h *Harness) awaitBurstsRun(ctx context.Context, inputs []orderInput) error {
	last := lastPerKey(inputs)
	return testkit.Poll(ctx, 20*time.Millisecond, "every burst's last message run", func(ctx context.Context) bool {
		e, err := h.orderedEffects(ctx)
		if err != nil {
			return false
		}
		for key, seq := range last {
			if !slices.Contains(e.Applied[key], seq) {
				return false
			}
		}
		return true
	})
}

// lastPerKey is each key's last input sequence.
func lastPerKey(inputs []orderInput) map[string]int64 {
	last := map[string]int64{}
	for _, in := range inputs {
		last[in.Key] = max(last[in.Key], in.Seq)
	}
	return last
}

// judgeBursts reads the effects: one result per burst, with its last
// message's effects and outputs counted; every other effect must be of a
// message of its key, with at most one output; each key's effects in
// stream order.
func (h *Harness) judgeBursts(ctx context.Context, ev *debouncedEvidence) ([]Result, string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	e, err := h.orderedEffects(ctx)
	if err != nil {
		return nil, "", err
	}
	outputs := map[int64]int{}
	for _, o := range e.Outputs {
		outputs[o.Seq]++
	}
	keyOf, lasts := map[int64]string{}, map[int64]bool{}
	var results []Result
	for _, round := range ev.rounds {
		for _, in := range round {
			keyOf[in.Seq] = in.Key
		}
		for key, seq := range lastPerKey(round) {
			lasts[seq] = true
			results = append(results, Result{Summaries: count(e.Applied[key], seq), Notifications: outputs[seq]})
		}
	}
	var problems []error
	splits := 0
	for key, seqs := range e.Applied {
		if !slices.IsSorted(seqs) {
			problems = append(problems, fmt.Errorf("key %s took effect out of stream order: %v", key, seqs))
		}
		for _, seq := range seqs {
			switch {
			case keyOf[seq] != key:
				problems = append(problems, fmt.Errorf("key %s took effect with sequence %d, not one of its messages", key, seq))
			case outputs[seq] > 1:
				problems = append(problems, fmt.Errorf("sequence %d of key %s has %d outputs", seq, key, outputs[seq]))
			case !lasts[seq]:
				splits++
			}
		}
	}
	// A kill splits a key's burst at most once: a split without one, or
	// more than one per kill and key, is a message run that a debounce
	// should have passed over.
	if len(ev.rounds) > 0 && splits > ev.kills*len(lastPerKey(ev.rounds[0])) {
		problems = append(problems, fmt.Errorf("%d runs of a burst's earlier message, more than one per kill and key (%d kills, %d keys)",
			splits, ev.kills, len(lastPerKey(ev.rounds[0]))))
	}
	note := fmt.Sprintf("%d bursts, %d extra runs of bursts split by a kill, recorder runs %d", len(results), splits, len(e.Runs))
	return results, note, errors.Join(problems...)
}
