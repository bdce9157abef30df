package opscheck

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// The order check. publish-recording-event is keyed by the payload's
// recordingId and ordered: the events of one recording are handled one at
// a time, in the order their inputs were stored in RECORDING, across
// instances, retries, restarts and kills. The function publishes an
// event's notice before its message is acknowledged, and the next message
// of the recording is delivered only after that acknowledgement, so the
// notices' order on OUT follows the inputs' order on RECORDING. The
// notices are what the checker observes with a sequence of their own (a
// timeline entry has none), so the check reads them.
//
// The rule. An input's place is the (incarnation, sequence) of its stored
// copy: incarnation counts the deletions of RECORDING that ended before
// the copy was stored, sequence is the one its PubAck gave. Inputs of one
// incarnation are in sequence order; a later incarnation comes after an
// earlier one (an input of the deleted stream was either copied to its
// partition before the deletion, ahead of everything stored after it, or
// deleted with its stream and never handled). An input takes part when:
//
//   - it is good, and the publisher knows its one stored copy: one send
//     attempt, answered by a PubAck for a new message. Not a careless
//     Double (two copies), not an attempt without a PubAck (stored or not,
//     and where, unknown), not a Resend stored again after the duplicate
//     window: a second copy is a new message, handled in its own place;
//   - no deletion of RECORDING was under way while its copy may have been
//     stored (from attemptTimeout before its PubAck to the PubAck), which
//     would leave its incarnation unknown;
//   - it was never dead-lettered: a dead letter lets its partition move on,
//     and its replay is a new message, stored after the others;
//   - no revision live from its publish to the settle phase had the
//     function with a filter that left its subject out: what a filter
//     passes over is not read in its place;
//   - it has an output.
//
// Then for any two inputs A and B of one recording that take part, A's
// place before B's, A's first output (the lowest OUT sequence among its
// outputs; a later one is a repeat of a handling, not its place) must be
// stored before B's first output. Each input B whose first output came
// before that of an input placed before it is one VOutOfOrder violation,
// with every input it overtook in the evidence.

// placed is one input that takes part in the order check.
type placed struct {
	t     *tokenView
	inc   int
	seq   uint64
	first output
}

func (p placed) String() string {
	return fmt.Sprintf("%s (%s) stored %s:%d incarnation %d, first output OUT:%d", p.t.in.Token, p.t.in.event(),
		recordingStream, p.seq, p.inc, p.first.Seq)
}

// orderViolations checks the order of every recording's inputs.
func (o *observed) orderViolations(views map[string]*tokenView, diag *diagnosis) []Violation {
	byRec := map[string][]placed{}
	for _, tok := range o.book.order {
		if p, ok := o.place(views[tok], diag); ok {
			byRec[p.t.in.RecordingID] = append(byRec[p.t.in.RecordingID], p)
			o.placed++
		}
	}
	var out []Violation
	for _, rec := range slices.Sorted(maps.Keys(byRec)) {
		ps := byRec[rec]
		slices.SortFunc(ps, func(a, b placed) int { return cmp.Or(cmp.Compare(a.inc, b.inc), cmp.Compare(a.seq, b.seq)) })
		for j, b := range ps {
			var ev []string
			for _, a := range ps[:j] {
				if a.first.Seq > b.first.Seq {
					ev = append(ev, "order: overtook "+a.String())
				}
			}
			if len(ev) == 0 {
				continue
			}
			ev = append([]string{fmt.Sprintf("order: recording %s: this input %s", rec, b)}, ev...)
			out = append(out, Violation{Token: b.t.in.Token, What: VOutOfOrder, Suspects: diag.suspects(b.t, VOutOfOrder),
				Evidence: append(ev, b.t.evidence()...)})
		}
	}
	return out
}

// place is t's place, if it takes part in the order check.
func (o *observed) place(t *tokenView, diag *diagnosis) (placed, bool) {
	if t == nil || t.in == nil || t.in.Family != Recording || t.in.Poison != Good {
		return placed{}, false
	}
	if len(t.copies) != 1 || !t.copies[0].Definite || len(t.dls) > 0 || len(t.replays) > 0 || len(t.outs) == 0 {
		return placed{}, false
	}
	if diag.filteredOut(t, false) {
		return placed{}, false
	}
	c := t.copies[0]
	from := c.At.Add(-attemptTimeout)
	inc := 0
	for _, d := range o.deletions {
		switch {
		case d.Stream != recordingStream:
		case d.End.Before(from):
			inc++
		case !d.Start.After(c.At):
			return placed{}, false // stored before or after this deletion: unknown
		}
	}
	first := slices.MinFunc(t.outs, func(a, b output) int { return cmp.Compare(a.Seq, b.Seq) })
	return placed{t: t, inc: inc, seq: c.Seq, first: first}, true
}

// notOrdered reports whether a revision live at the input's publish or
// after it (the settle phase's too: what waited is handled then) had its
// function without `ordered: true` (the keyConcurrency control).
func (d *diagnosis) notOrdered(t *tokenView) bool {
	for i, r := range d.live {
		if i+1 < len(d.live) && d.live[i+1].At.Before(t.first) {
			continue // replaced before the input was published
		}
		if f := function(r.M, t.in.Family); f != nil && !f.Ordered {
			return true
		}
	}
	return false
}

// anyLive reports whether pred holds for a revision live at some time
// between the input's publish and the settle phase.
func (d *diagnosis) anyLive(t *tokenView, pred func(liveRev) bool) bool {
	for i, r := range d.live {
		end := d.settled
		if i+1 < len(d.live) {
			end = d.live[i+1].At
		}
		if end.Before(t.first) || !r.At.Before(d.settled) {
			continue
		}
		if pred(r) {
			return true
		}
	}
	return false
}
