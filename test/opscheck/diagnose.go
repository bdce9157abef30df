package opscheck

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jetfn/jetfn/manifest"
)

// Suspects name the mechanism a violation most likely comes from. They are
// heuristics over the evidence, for the reader and the tally; the
// violation itself is the fact.
const (
	SReplayIdentity = "dlq replay gave the input a new identity"
	SRenameReplay   = "a renamed function or durable handled the input again"
	SHistoryReplay  = "handled again after the duplicate window (history replayed)"
	SSeqCollision   = "a sequence-based ID was reused after the stream was recreated"
	SFilterSkip     = "a revision left the input's subject out of its filter (or removed its function) before it was handled"
	SConcurrentRuns = "two concurrent runs of one recording both updated its count"
	SNotOrdered     = "the recording function was not ordered (a keyConcurrency control): several events of a recording ran at once"
	SDiverged       = "an instance refused a revision the others applied (instances diverged)"
	SStatusHeader   = "an empty message with a Status header was taken for a pull status and never handled"
	STabHeader      = "a TAB in a header value made a good input malformed"
	SStrayStream    = "a stream outside the manifest stores the remote's subject: its PubAck was read as the reply"
	SUnexplained    = "no suspect"
)

// liveRev is a revision that became live at At.
type liveRev struct {
	At time.Time
	Op int
	M  *manifest.Manifest
}

// diagnosis holds the indexes the heuristics look things up in.
type diagnosis struct {
	live     []liveRev
	settled  time.Time // when the settle phase deployed the base revision
	docsByID map[string]document
	dlsByID  map[string]*deadLetter
	// refusals are when an instance logged that it refused a revision.
	refusals []time.Time
}

func newDiagnosis(o *observed) *diagnosis {
	d := &diagnosis{live: o.live, settled: o.settleStart, docsByID: map[string]document{}, dlsByID: map[string]*deadLetter{}}
	for _, docs := range o.effects.docs {
		for _, doc := range docs {
			d.docsByID[doc.ID] = doc
		}
	}
	for _, l := range o.dls {
		d.dlsByID[l.MsgID] = l
	}
	for _, e := range o.events {
		if strings.HasSuffix(e.Kind, " log") && strings.HasPrefix(e.Detail, "refused deployment revision") {
			d.refusals = append(d.refusals, e.At)
		}
	}
	return d
}

// suspects explains one violation of t.
func (d *diagnosis) suspects(t *tokenView, what string) []string {
	var out []string
	switch what {
	case VDupEffect, VDupOutput, VDupDL:
		out = d.duplicates(t)
	case VLost, VMissingEffect, VMissingOutput, VMissingDL:
		out = d.missing(t)
	case VOutOfOrder:
		if d.notOrdered(t) {
			out = []string{SNotOrdered}
		}
	case VGoodRefused:
		out = d.refused(t)
	case VLeftDeadLetter:
		out = append(d.refused(t), d.missing(t)...)
	}
	if what == VMissingEffect || what == VLost {
		out = append(out, d.refused(t)...)
	}
	if len(out) == 0 {
		out = []string{SUnexplained}
	}
	return out
}

func (d *diagnosis) duplicates(t *tokenView) []string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, doc := range t.docs {
		if strings.Contains(doc.ID, ":replay:") {
			add(SReplayIdentity)
		}
	}
	fns, ids := map[string]bool{}, map[string]int{}
	for _, o := range t.outs {
		if strings.Contains(o.MsgID, ":replay:") {
			add(SReplayIdentity)
		}
		fns[outputFunction(o.MsgID)] = true
		ids[o.MsgID]++
	}
	dlIDs := map[string]int{}
	for _, l := range t.dls {
		if l.Function != "" {
			fns[l.Function] = true
		}
		if l.MsgID != "" {
			dlIDs[l.MsgID]++
		}
	}
	for _, n := range dlIDs {
		if n > 1 {
			add(SHistoryReplay) // the stream forgot the ID: a replayed dead letter is deleted
		}
	}
	if len(fns) > 1 {
		add(SRenameReplay)
	}
	for _, n := range ids {
		if n > 1 {
			add(SHistoryReplay)
		}
	}
	return out
}

// outputFunction is <function> of jetfn:<function>:<subject>:<key>.
func outputFunction(id string) string {
	parts := strings.SplitN(id, ":", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[1]
}

func (d *diagnosis) missing(t *tokenView) []string {
	var out []string
	if t.in.Poison == Status {
		out = append(out, SStatusHeader)
	}
	if d.filteredOut(t, true) {
		out = append(out, SFilterSkip)
	}
	if d.diverged(t) {
		out = append(out, SDiverged)
	}
	for _, c := range t.copies {
		key := c.Stream + ":" + fmt.Sprint(c.Seq)
		if doc, ok := d.docsByID[key]; ok && c.Definite && doc.Token != t.in.Token && t.in.Family == Remote {
			out = append(out, SSeqCollision+fmt.Sprintf(" (document %s is input %s's)", key, doc.Token))
		}
		for id, l := range d.dlsByID {
			if strings.HasSuffix(id, ":"+key) && l.Token != t.in.Token && c.Definite {
				out = append(out, SSeqCollision+fmt.Sprintf(" (dead letter %s is input %s's)", id, l.Token))
			}
		}
	}
	return out
}

// diverged reports whether an instance refused a revision between the
// input's publish and the settle phase.
func (d *diagnosis) diverged(t *tokenView) bool {
	return slices.ContainsFunc(d.refusals, func(at time.Time) bool { return !at.Before(t.first) && at.Before(d.settled) })
}

// filteredOut reports whether a revision live between the input's publish
// and the settle phase did not bind its subject: its function had a filter
// that left the subject out, or (when absent counts) was removed.
func (d *diagnosis) filteredOut(t *tokenView, absent bool) bool {
	return d.anyLive(t, func(r liveRev) bool {
		f := function(r.M, t.in.Family)
		if f == nil {
			return absent
		}
		return !manifest.CoveredByAny(t.in.Subject, f.FilterSubjects())
	})
}

func (d *diagnosis) refused(t *tokenView) []string {
	var out []string
	for _, l := range t.dls {
		switch {
		case strings.Contains(l.Error, "control character") && t.in.Tab && !slices.Contains(out, STabHeader):
			out = append(out, STabHeader)
		case strings.Contains(l.Error, "reply contract") && !slices.Contains(out, SStrayStream):
			out = append(out, SStrayStream)
		}
	}
	return out
}
