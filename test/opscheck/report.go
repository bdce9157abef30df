package opscheck

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// shownPerKind bounds how many inputs the report details per kind of
// violation.
const shownPerKind = 3

// Summary is one line: the seed, the verdict and the counts.
func (r *Result) Summary() string {
	verdict := "ok"
	if !r.OK() {
		verdict = "FAILED: " + r.kinds()
	}
	return fmt.Sprintf("opscheck seed %d: %s; %d inputs, %d dead letters, %d outputs, %d recording events in the order check; window %s; settled in %s; took %s",
		r.Schedule.Seed, verdict, r.Inputs, r.DeadLetters, r.Outputs, r.Ordered, r.Window, r.SettleTook.Round(time.Millisecond),
		r.Took.Round(time.Second))
}

// kinds counts the violations by kind.
func (r *Result) kinds() string {
	counts := map[string]int{}
	for _, v := range r.Violations {
		counts[v.What]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// Suspects counts the violations by suspect mechanism (the first part of
// each suspect, before any detail in parentheses).
func (r *Result) Suspects() map[string]int {
	out := map[string]int{}
	for _, v := range r.Violations {
		for _, s := range v.Suspects {
			name, _, _ := strings.Cut(s, " (")
			out[name]++
		}
	}
	return out
}

// Kinds lists the kinds of violation the run found, sorted.
func (r *Result) Kinds() []string {
	seen := map[string]int{}
	for _, v := range r.Violations {
		seen[v.What]++
	}
	return slices.Sorted(maps.Keys(seen))
}

// Command is how to run this schedule again.
func (r *Result) Command() string {
	s := r.Schedule
	cmd := fmt.Sprintf("go run ./test/opscheck/cmd/opscheck -seed %d -duration %s -instances %d -nodes %d -prune=%v -window %s",
		s.Seed, s.Duration, s.Instances, s.Nodes, s.Prune, r.Window)
	if r.Keying != "" {
		cmd += fmt.Sprintf(" -recording-keying %q", r.Keying)
	}
	if s.Keep != nil {
		keep := make([]string, len(s.Keep))
		for i, k := range s.Keep {
			keep[i] = strconv.Itoa(k)
		}
		cmd += " -keep " + strings.Join(keep, ",")
	}
	return cmd
}

// Report prints the summary, how to replay the seed, and for each kind of
// violation the first inputs with their evidence and a minimal history:
// their own events and the operations that could touch them between their
// publish and their last observation.
func (r *Result) Report(w io.Writer) {
	fmt.Fprintln(w, r.Summary())
	fmt.Fprintln(w, "replay:", r.Command())
	sus := r.Suspects()
	for _, k := range slices.Sorted(maps.Keys(sus)) {
		fmt.Fprintf(w, "suspect ×%d: %s\n", sus[k], k)
	}
	shown := map[string]int{}
	for _, v := range r.Violations {
		if shown[v.What] >= shownPerKind {
			continue
		}
		shown[v.What]++
		fmt.Fprintf(w, "\n--- %s", v.What)
		if v.Token != "" {
			fmt.Fprintf(w, ": input %s", v.Token)
		}
		fmt.Fprintln(w)
		for _, sus := range v.Suspects {
			fmt.Fprintln(w, "  suspect: "+sus)
		}
		for _, e := range v.Evidence {
			fmt.Fprintln(w, "  "+e)
		}
		if v.Token != "" {
			fmt.Fprintln(w, "  history:")
			r.History.Write(w, r.minimal(v.Token))
		}
	}
}

// minimal is the token's own events and every nemesis event that could
// have touched it, from its first publish to its last observation (or the
// end of the operations when nothing was seen of it).
func (r *Result) minimal(tok string) []Event {
	evs := r.History.Events()
	var from, to time.Time
	var fam Family
	for _, e := range evs {
		if e.Token != tok {
			continue
		}
		if from.IsZero() {
			from = e.At
		}
		to = e.At
		if e.Op >= 0 && r.Schedule.Ops[e.Op].Input != nil {
			fam = r.Schedule.Ops[e.Op].Input.Family
		}
	}
	if to.Sub(from) < 5*time.Second {
		to = from.Add(r.Schedule.Duration)
	}
	prior := r.priorOps(evs, from, fam)
	var out []Event
	for _, e := range evs {
		inWindow := !e.At.Before(from) && !e.At.After(to) && r.touches(e, fam)
		if e.Token == tok || inWindow || (prior[e.Op] && e.Token == "") {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int { return a.At.Compare(b.At) })
	return out
}

// priorOps are the operations before t that set the scene for an input of
// fam published at t: the last deploy or rollback (the revision live at
// its publish) and the last deletion of its stream or consumer.
func (r *Result) priorOps(evs []Event, t time.Time, fam Family) map[int]bool {
	revision, deletion := -2, -2
	for _, e := range evs {
		if e.Op < 0 || e.Phase != OK || e.At.After(t) {
			continue
		}
		switch op := r.Schedule.Ops[e.Op]; op.Kind {
		case KDeploy, KRollback:
			revision = e.Op
		case KDeleteStream, KDeleteConsumer, KDeleteConsumerAllDown:
			if op.Family == fam {
				deletion = e.Op
			}
		}
	}
	return map[int]bool{revision: true, deletion: true}
}

// touches reports whether a non-publish event may concern an input of fam.
func (r *Result) touches(e Event, fam Family) bool {
	if e.Token != "" {
		return false
	}
	if e.Op < 0 {
		return true // notes: instance exits, the settle phase
	}
	op := r.Schedule.Ops[e.Op]
	switch op.Kind {
	case KPublish:
		return false
	case KDeleteConsumer, KDeleteConsumerAllDown, KDeleteStream:
		return op.Family == fam
	case KReplay:
		return op.Replay != "function" || op.Family == fam
	}
	return true
}
