package opscheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Violation is one broken promise: about one input (Token set) or about
// the whole run.
type Violation struct {
	Token    string
	What     string
	Suspects []string
	Evidence []string
}

// The kinds of violation.
const (
	VLost           = "lost: acknowledged, never handled, never dead-lettered"
	VMissingEffect  = "missing effect"
	VMissingOutput  = "missing output"
	VDupEffect      = "duplicate effect"
	VDupOutput      = "duplicate output"
	VPoisonHandled  = "poison input handled"
	VMissingDL      = "dead letter missing"
	VDupDL          = "duplicate dead letter"
	VDoubleCount    = "event counted twice"
	VCountLost      = "recording's event count below its events"
	VOutOfOrder     = "out of order: handled before an event of its recording stored earlier"
	VNotSettled     = "not settled in bounded time"
	VUntraceable    = "untraceable effect or output"
	VLeftDeadLetter = "good input left dead-lettered"
	VGoodRefused    = "good input dead-lettered as malformed or permanent"
)

// deletion is one deletion of an input stream by the nemesis.
type deletion struct {
	Stream     string
	Start, End time.Time
}

// observed is everything the checker reads at the end of a run.
type observed struct {
	book      *ledger
	dls       []*deadLetter
	replays   []replayRec
	outputs   []output
	effects   *effects
	deletions []deletion
	// live is every revision in the order it became live; settleStart is
	// when the settle phase began.
	live        []liveRev
	settleStart time.Time
	// window is the output stream's duplicate window.
	window time.Duration
	// events is the history.
	events []Event
	// placed counts the inputs the order check placed (order.go).
	placed int
}

// tokenView gathers what is known about one token.
type tokenView struct {
	in      *Input
	mode    Mode
	first   time.Time
	acked   bool
	copies  []copyRec
	exposed bool
	docs    []document
	outs    []output
	dls     map[uint64]*deadLetter
	replays []replayRec
	window  time.Duration
}

// check verifies every token's promise and returns what is broken.
func check(o *observed) []Violation {
	views := o.views()
	diag := newDiagnosis(o)
	var out []Violation
	for _, tok := range o.book.order {
		out = append(out, views[tok].violations(diag)...)
	}
	for tok := range views {
		if o.book.inputs[tok] == nil {
			out = append(out, Violation{Token: tok, What: VUntraceable, Evidence: views[tok].evidence()})
		}
	}
	out = append(out, o.countViolations(views)...)
	out = append(out, o.orderViolations(views, diag)...)
	return out
}

// countViolations compares each recording's eventCount with its timeline:
// publish-recording-event counts an event in the same update that marks it
// counted, before its timeline entry, and a redelivery repairs a crash in
// between, so once settled the two agree. More counts than entries is an
// event counted twice; fewer, a count an update lost (two updates of one
// recording at once on FerretDB, which the function's order prevents).
//
// One case is excused: an event counted without its timeline entry whose
// input a stream deletion exposed. Its last delivery counted it and failed
// before the insert (a Mongo outage past maxDeliver: dead-lettered), and
// the operator deleted the stream before the replay that would have
// inserted it was handled (opscheck seed 20261209). The deletion lost the
// repair, as it may lose any stored message's effects.
func (o *observed) countViolations(views map[string]*tokenView) []Violation {
	var out []Violation
	for _, rec := range slices.Sorted(maps.Keys(o.effects.eventCounts)) {
		n, entries := o.effects.eventCounts[rec], o.effects.timeline[rec]
		excused := 0
		for _, tok := range o.effects.countedWithoutEntry[rec] {
			if v := views[tok]; v != nil && v.exposed {
				excused++
			}
		}
		ev := []string{fmt.Sprintf("recording %s: eventCount %d, %d timeline entries, %d counted without an entry after a stream deletion",
			rec, n, entries, excused)}
		switch {
		case n-excused > entries:
			out = append(out, Violation{What: VDoubleCount, Suspects: []string{SConcurrentRuns}, Evidence: ev})
		case n < entries:
			out = append(out, Violation{What: VCountLost, Suspects: []string{SConcurrentRuns}, Evidence: ev})
		}
	}
	return out
}

func (o *observed) views() map[string]*tokenView {
	v := map[string]*tokenView{}
	get := func(tok string) *tokenView {
		if v[tok] == nil {
			v[tok] = &tokenView{dls: map[uint64]*deadLetter{}}
		}
		return v[tok]
	}
	for _, tok := range o.book.order {
		t := get(tok)
		t.in, t.mode, t.first, t.acked = o.book.inputs[tok], o.book.modes[tok], o.book.first[tok], o.book.acked[tok]
		t.copies = o.book.copies[tok]
		t.window = o.window
		t.exposed = slices.ContainsFunc(o.deletions, func(d deletion) bool { return d.Stream == t.stream() && !d.End.Before(t.first) })
	}
	for tok, docs := range o.effects.docs {
		get(tok).docs = docs
	}
	for _, out := range o.outputs {
		t := get(out.Token)
		t.outs = append(t.outs, out)
	}
	for _, d := range o.dls {
		get(d.Token).dls[d.Seq] = d
	}
	for _, r := range o.replays {
		t := get(r.Token)
		t.replays = append(t.replays, r)
		if t.dls[r.DLSeq] == nil {
			t.dls[r.DLSeq] = &deadLetter{Seq: r.DLSeq, Token: r.Token, Error: "(replayed before the observer read it)"}
		}
	}
	return v
}

func (t *tokenView) stream() string {
	if t.in.Family == Remote {
		return greetingsStream
	}
	return recordingStream
}

// copyRange is how many copies of the input the streams stored: at least
// lo (definite PubAcks, or one when a duplicate PubAck proved an earlier
// attempt landed), at most hi (every attempt without a clear refusal).
func (t *tokenView) copyRange() (lo, hi int) {
	for _, c := range t.copies {
		if c.Definite {
			lo++
		}
	}
	if t.acked {
		lo = max(lo, 1)
	}
	hi = max(len(t.copies), lo)
	if t.exposed {
		lo = 0 // a deleted stream took its copies with it
	}
	return lo, hi
}

// effectRange is how many effects (and outputs) the input must leave: one
// per stored copy when its identity is the stream sequence (the remote
// function and an input without a message ID), else at most one.
func (t *tokenView) effectRange() (lo, hi int) {
	lo, hi = t.copyRange()
	if t.in.Family == Recording || t.mode == Careful || t.mode == Resend {
		lo, hi = min(lo, 1), min(hi, 1)
	}
	return lo, hi
}

func (t *tokenView) violations(diag *diagnosis) []Violation {
	var what []string
	if t.in.Poison == Good {
		what = t.goodViolations()
	} else {
		what = t.poisonViolations()
	}
	out := make([]Violation, 0, len(what))
	for _, w := range what {
		out = append(out, Violation{Token: t.in.Token, What: w, Suspects: diag.suspects(t, w), Evidence: t.evidence()})
	}
	return out
}

func (t *tokenView) goodViolations() []string {
	lo, hi := t.effectRange()
	d, o := len(t.docs), len(t.outs)
	var out []string
	switch {
	case d < lo && o == 0 && len(t.dls) == 0:
		out = append(out, VLost)
	case d < lo:
		out = append(out, VMissingEffect)
	case o < lo:
		out = append(out, VMissingOutput)
	}
	if d > hi {
		out = append(out, VDupEffect)
	}
	if o-t.lateReplayOutputs() > hi {
		out = append(out, VDupOutput)
	}
	if slices.ContainsFunc(slices.Collect(maps.Values(t.dls)), refused) {
		out = append(out, VGoodRefused)
	}
	_, chi := t.copyRange()
	if len(t.dls) > chi+len(t.replays) {
		out = append(out, VDupDL)
	}
	if len(t.dls) > len(t.replays) {
		out = append(out, VLeftDeadLetter)
	}
	return out
}

// refused reports a dead letter whose reason is not a transient failure.
func refused(d *deadLetter) bool {
	return strings.HasPrefix(d.Error, "malformed") || strings.HasPrefix(d.Error, "permanent")
}

// lateReplayOutputs counts the outputs a replay published more than the
// duplicate window after the first: keeping the input's identity cannot
// make the output stream drop those, so they break no promise.
func (t *tokenView) lateReplayOutputs() int {
	if len(t.replays) == 0 || len(t.outs) < 2 {
		return 0
	}
	first := slices.MinFunc(t.outs, func(a, b output) int { return a.At.Compare(b.At) }).At
	n := 0
	for _, o := range t.outs {
		if o.At.Sub(first) > t.window {
			n++
		}
	}
	return n
}

func (t *tokenView) poisonViolations() []string {
	lo, hi := t.copyRange()
	n := len(t.dls)
	var out []string
	if len(t.docs) > 0 || len(t.outs) > 0 {
		out = append(out, VPoisonHandled)
	}
	if n < lo+len(t.replays) {
		out = append(out, VMissingDL)
	}
	if n > hi+len(t.replays) {
		out = append(out, VDupDL)
	}
	return out
}

// evidence lists what the checker saw of the token.
func (t *tokenView) evidence() []string {
	var ev []string
	if t.in != nil {
		lo, hi := t.copyRange()
		elo, ehi := t.effectRange()
		ev = append(ev, fmt.Sprintf("input: %s %s %s on %s, msg id %s; copies %d..%d, effects wanted %d..%d, stream deleted after its publish: %v",
			t.mode, t.in.Family, poisonName(t.in.Poison), t.in.Subject, t.in.MsgID, lo, hi, elo, ehi, t.exposed))
		if t.in.Family == Recording {
			ev = append(ev, fmt.Sprintf("recording %s, event ts %d", t.in.RecordingID, t.in.TS))
		}
	}
	for _, c := range t.copies {
		ev = append(ev, fmt.Sprintf("copy: %s %s:%d definite=%v at %s", c.Mode, c.Stream, c.Seq, c.Definite, c.At.Format(time.TimeOnly)))
	}
	for _, d := range t.docs {
		ev = append(ev, "document _id "+d.ID)
	}
	for _, o := range t.outs {
		ev = append(ev, fmt.Sprintf("output OUT:%d id %s at %s", o.Seq, o.MsgID, o.At.Format(time.TimeOnly)))
	}
	for _, d := range t.dls {
		ev = append(ev, d.String())
	}
	for _, r := range t.replays {
		ev = append(ev, fmt.Sprintf("replay of DEADLETTER:%d as %s to %s:%d", r.DLSeq, r.MsgID, r.Stream, r.StoredSeq))
	}
	return ev
}
