package crash

import (
	"fmt"
	"slices"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/test/crash/orderrun"
)

// The per-key order checker of the ordered rows (ordered.go). It judges
// three records of one row, each read after every process has stopped:
//
//   - applied: per key, the order in which the recorder's effects first
//     happened, each sequence once (an atomic $addToSet, so a redelivered
//     run changes nothing). It must be exactly the key's published
//     sequences, in stream order: a sequence missing is a lost message, one
//     before an earlier sequence is a key handled out of order.
//   - runs: every run the recorder saw, with the key's applied sequences
//     just before it. A run of the key's i-th sequence must find exactly
//     the first i applied (its first run, or a failed one) or the first
//     i+1 (a repeat after its effect, as after a SIGKILL between the
//     remote's reply and jetfn's ack). Fewer means it ran while an earlier
//     message of its key had no effect yet (two messages of one key in
//     flight, or a later one overtaking a failing one); more means it ran
//     after a later message's effect. Either is a violation even when the
//     applied order ends up right, so a failing run cannot hide one.
//   - outputs: jetfn's recorded.orders outputs, one per input with the
//     input's scoped message ID, stored per key in stream order.

// orderInput is one published message of an ordered row.
type orderInput struct {
	Key   string
	Seq   int64
	MsgID string
}

// orderRun is one run the recorder saw (its ordered_runs document).
type orderRun = orderrun.Run

// orderOutput is one stored recorded.orders output.
type orderOutput struct {
	Key    string
	Seq    int64
	MsgID  string
	Stored time.Time
}

// orderEffects is what a row left behind.
type orderEffects struct {
	Applied map[string][]int64
	Runs    []orderRun
	Outputs []orderOutput // in stream order
}

// orderVerdict is the checker's judgement of one row.
type orderVerdict struct {
	// Results has one entry per input, in publish order: Summaries counts
	// the input's sequence among its key's applied effects, Notifications
	// its outputs.
	Results []Result
	// Violations are the breaks of order, each described.
	Violations []string
	// Runs, Repeats (runs of a sequence already applied) and Failed count
	// the recorder's runs.
	Runs, Repeats, Failed int
}

// checkOrder judges effects against the inputs of a row of function fn.
func checkOrder(fn string, inputs []orderInput, e orderEffects) orderVerdict {
	var v orderVerdict
	published := map[string][]int64{}
	for _, in := range inputs {
		published[in.Key] = append(published[in.Key], in.Seq)
	}
	v.Violations = append(v.Violations, checkApplied(published, e.Applied)...)
	v.checkRuns(published, e.Runs)
	v.Violations = append(v.Violations, checkOutputs(fn, inputs, published, e.Outputs)...)
	outputs := map[int64]int{}
	for _, o := range e.Outputs {
		outputs[o.Seq]++
	}
	for _, in := range inputs {
		n := 0
		if slices.Contains(e.Applied[in.Key], in.Seq) {
			n = 1
		}
		v.Results = append(v.Results, Result{Summaries: n, Notifications: outputs[in.Seq]})
	}
	return v
}

// checkApplied wants each key's applied effects to be its published
// sequences in stream order, each once; a missing one is left to the
// per-input counts.
func checkApplied(published, applied map[string][]int64) []string {
	var out []string
	for _, key := range sortedMapKeys(applied) {
		seqs, want := applied[key], published[key]
		seen := map[int64]bool{}
		for i, s := range seqs {
			switch {
			case !slices.Contains(want, s):
				out = append(out, fmt.Sprintf("key %s: effect of seq %d, which was not published on it", key, s))
			case seen[s]:
				out = append(out, fmt.Sprintf("key %s: seq %d has two effects", key, s))
			case i > 0 && s < seqs[i-1]:
				out = append(out, fmt.Sprintf("key %s: effect of seq %d after that of seq %d (applied order %v)",
					key, s, seqs[i-1], clip(seqs)))
			}
			seen[s] = true
		}
	}
	return out
}

// checkRuns judges every run by the key's effects just before it.
func (v *orderVerdict) checkRuns(published map[string][]int64, runs []orderRun) {
	for _, r := range runs {
		v.Runs++
		if r.Failed {
			v.Failed++
		}
		want := published[r.Key]
		i := slices.Index(want, r.Seq)
		if i < 0 {
			v.Violations = append(v.Violations, fmt.Sprintf("key %s: a run of seq %d, which was not published on it", r.Key, r.Seq))
			continue
		}
		switch {
		case slices.Equal(r.Before, want[:i]):
		case slices.Equal(r.Before, want[:i+1]):
			v.Repeats++
		case len(r.Before) <= i || !slices.Equal(r.Before[:i], want[:i]):
			v.Violations = append(v.Violations, fmt.Sprintf("key %s: seq %d ran (delivery %d) before seq %d had its effect "+
				"(effects before it: %v)", r.Key, r.Seq, r.Delivery, firstMissing(want[:i], r.Before), clip(r.Before)))
		default:
			later := r.Before[i]
			if later == r.Seq && len(r.Before) > i+1 {
				later = r.Before[i+1]
			}
			v.Violations = append(v.Violations, fmt.Sprintf("key %s: seq %d ran (delivery %d) after the effect of seq %d "+
				"(effects before it: %v)", r.Key, r.Seq, r.Delivery, later, clip(r.Before)))
		}
	}
}

// checkOutputs wants each output under the scoped message ID of its
// input, and each key's outputs stored in stream order.
func checkOutputs(fn string, inputs []orderInput, published map[string][]int64, outs []orderOutput) []string {
	ids := map[int64]string{}
	for _, in := range inputs {
		ids[in.Seq], _ = jetfn.OutputMsgID(fn, recordedSubject, in.MsgID)
	}
	var out []string
	last := map[string]int64{}
	for _, o := range outs {
		if !slices.Contains(published[o.Key], o.Seq) {
			out = append(out, fmt.Sprintf("key %s: an output of seq %d, which was not published on it", o.Key, o.Seq))
			continue
		}
		if o.MsgID != ids[o.Seq] {
			out = append(out, fmt.Sprintf("key %s: the output of seq %d has message ID %q, want %q", o.Key, o.Seq, o.MsgID, ids[o.Seq]))
		}
		if o.Seq < last[o.Key] {
			out = append(out, fmt.Sprintf("key %s: the output of seq %d stored after that of seq %d", o.Key, o.Seq, last[o.Key]))
		}
		last[o.Key] = max(last[o.Key], o.Seq)
	}
	return out
}

// firstMissing is the first of want not in have.
func firstMissing(want, have []int64) int64 {
	for _, s := range want {
		if !slices.Contains(have, s) {
			return s
		}
	}
	return 0
}

// clip shortens a long sequence list for a message.
func clip(s []int64) string {
	if len(s) <= 8 {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v … %v (%d)", s[:3], s[len(s)-3:], len(s))
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
