package opscheck

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Phase is where an operation is, in Jepsen's terms: invoked, then ok,
// failed (it certainly did not happen) or info (it may have happened).
// Observations and notes are info too.
type Phase string

// The phases of an event.
const (
	Invoke Phase = "invoke"
	OK     Phase = "ok"
	Fail   Phase = "fail"
	Info   Phase = "info"
)

// Event is one entry of the history.
type Event struct {
	At time.Time
	// Op is the operation's index in the schedule, -1 for what no
	// operation caused (an observation, a process exit).
	Op    int
	Kind  string
	Phase Phase
	// Token names the input the event is about, if one.
	Token  string
	Detail string
}

// History is every event of a run, in the order they were recorded.
type History struct {
	start time.Time
	mu    sync.Mutex
	evs   []Event
}

func newHistory() *History { return &History{start: time.Now()} }

// Add records e, stamping it now if it has no time.
func (h *History) Add(e Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.evs = append(h.evs, e)
}

// Info records a note by a component (an instance, the checker).
func (h *History) Info(kind, detail string) {
	h.Add(Event{Op: -1, Kind: kind, Phase: Info, Detail: detail})
}

// Events is a copy of the history.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.evs...)
}

// Since is the time of t from the start of the run.
func (h *History) Since(t time.Time) time.Duration { return t.Sub(h.start).Round(time.Millisecond) }

// Write prints events one a line, times from the start of the run.
func (h *History) Write(w io.Writer, evs []Event) {
	for _, e := range evs {
		op := "   -"
		if e.Op >= 0 {
			op = fmt.Sprintf("%4d", e.Op)
		}
		tok := ""
		if e.Token != "" {
			tok = " [" + e.Token + "]"
		}
		fmt.Fprintf(w, "  %9s %s %-7s %-22s%s %s\n", h.Since(e.At), op, e.Phase, e.Kind, tok, e.Detail)
	}
}
