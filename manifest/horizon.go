package manifest

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Horizon is how long after a message's first delivery a function may still
// publish that message's output. A redelivery can come that late, and its
// publish is dropped as a duplicate only while the output stream still
// remembers the first publish's message ID.
type Horizon struct {
	Function string
	// Stream is the output stream whose duplicate window must cover it.
	Stream string
	Window time.Duration
	// The parts: how long every instance may be down, the waits before
	// the redeliveries, and the handler's own time limit per delivery.
	MaxOutage    time.Duration
	Redeliveries time.Duration
	Timeout      time.Duration
	MaxDeliver   int
	// MaxRetryAfter is the function's RetryAfterBound, which Redeliveries
	// counts for every delivery.
	MaxRetryAfter time.Duration
}

// Total is the horizon itself. Every delivery may run its handler for up to
// the timeout before it is settled, so the timeout counts once per delivery.
func (h Horizon) Total() time.Duration {
	return h.MaxOutage + h.Redeliveries + time.Duration(h.MaxDeliver)*h.Timeout
}

// MinWindow is the smallest duplicate window that passes: twice the
// horizon, the margin jetstream-exactly-once.txt asks for.
func (h Horizon) MinWindow() time.Duration { return 2 * h.Total() }

// redeliveryWait sums, over every allowed delivery, the longest wait before
// the next one: ackWait when the process died, the backoff entry when the
// handler failed, the delay a RetryAfter or a remote's Retry-After asked
// for (at most RetryAfterBound) on any delivery.
func (f *FunctionSpec) redeliveryWait() time.Duration {
	var sum time.Duration
	for n := 1; n <= f.MaxDeliver; n++ {
		sum += max(f.AckWait, f.RetryDelay(uint64(n)), f.RetryAfterBound())
	}
	return sum
}

// RetryAfterBound is the longest delay a handler's RetryAfter or a remote's
// Retry-After gets; the runtime clamps a longer one to it. Without
// maxRetryAfter it is the longest wait the function already allows between
// deliveries, ackWait or its largest backoff entry, so the default adds to
// the horizon only what a growing backoff's early entries leave out, while
// an unbounded request (a remote's Retry-After of 10^9 seconds) could
// outlive any duplicate window.
func (f *FunctionSpec) RetryAfterBound() time.Duration {
	if f.MaxRetryAfter > 0 {
		return f.MaxRetryAfter
	}
	longest := f.AckWait
	for _, d := range f.Backoff {
		longest = max(longest, d)
	}
	return longest
}

// RetryDelay is the backoff before the redelivery that follows attempt n:
// the backoff entry for n (the last one past its end), or ackWait without a
// backoff. A plain Nak would ignore the consumer's BackOff and redeliver at
// once, so the runtime applies this schedule itself with NakWithDelay.
func (f *FunctionSpec) RetryDelay(n uint64) time.Duration {
	if len(f.Backoff) == 0 {
		return f.AckWait
	}
	i := min(int(n)-1, len(f.Backoff)-1)
	return f.Backoff[max(i, 0)]
}

// Horizons computes one horizon per function and output stream.
func (m *Manifest) Horizons() []Horizon {
	var out []Horizon
	for _, f := range m.Functions {
		seen := map[string]bool{}
		for _, o := range f.Outputs {
			s, ok := m.Stream(o.Stream)
			if !ok || seen[s.Name] {
				continue
			}
			seen[s.Name] = true
			out = append(out, Horizon{
				Function: f.Name, Stream: s.Name, Window: s.Duplicates,
				MaxOutage: f.MaxOutage, Redeliveries: f.redeliveryWait(), Timeout: f.Timeout, MaxDeliver: f.MaxDeliver,
				MaxRetryAfter: f.RetryAfterBound(),
			})
		}
	}
	return out
}

// CheckDuplicateWindows returns an ErrShortWindow error for every output
// stream whose duplicate window is shorter than twice the horizon of a
// function that publishes to it, each a *Problem at the stream's
// duplicates; nil when the manifest says allowShortWindow.
func (m *Manifest) CheckDuplicateWindows() error {
	if m.AllowShortWindow {
		return nil
	}
	return errors.Join(m.shortWindows()...)
}

// ShortWindowsAccepted lists, as warnings, the short windows a manifest's
// allowShortWindow accepts.
func (m *Manifest) ShortWindowsAccepted() []string {
	if !m.AllowShortWindow {
		return nil
	}
	var out []string
	for _, err := range m.shortWindows() {
		out = append(out, "accepted by allowShortWindow: "+err.Error())
	}
	return out
}

func (m *Manifest) shortWindows() []error {
	var errs []error
	for _, h := range m.Horizons() {
		if h.Window < h.MinWindow() {
			errs = append(errs, m.problem(m.streamAt(h.Stream).Key("duplicates"), fmt.Errorf("%w: %s", ErrShortWindow, h.explain())))
		}
	}
	return errs
}

// streamAt is the place of the stream declared as name.
func (m *Manifest) streamAt(name string) place {
	i := slices.IndexFunc(m.Streams, func(s StreamSpec) bool { return s.Name == name })
	return at("streams").Index(i, name)
}

func (h Horizon) explain() string {
	return fmt.Sprintf("stream %s keeps message IDs for %s (duplicates), but function %s may publish "+
		"the same output up to %s after a message's first delivery: maxOutage %s + %d deliveries "+
		"waiting up to %s in all for redelivery (ackWait, backoff, or a Retry-After up to maxRetryAfter %s) + "+
		"%d × timeout %s. A redelivery that "+
		"comes after the window has forgotten the first publish's Nats-Msg-Id, so it stores a second "+
		"message, as the field report's 2-minute window did after a 130s outage. Set duplicates on "+
		"%s to at least %s (twice the horizon), or lower maxOutage; --allow-short-window accepts the risk.",
		h.Stream, h.Window, h.Function, h.Total(), h.MaxOutage, h.MaxDeliver, h.Redeliveries, h.MaxRetryAfter,
		h.MaxDeliver, h.Timeout,
		h.Stream, h.MinWindow())
}

// OutputStreamWarnings explains, for each output stream with a message or
// byte limit, how the limit can forget a message ID inside the duplicate
// window. It is a warning, not an error: whether the stream reaches its
// limit within the window depends on traffic that jetfn cannot see.
func (m *Manifest) OutputStreamWarnings() []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range m.Functions {
		for _, o := range f.Outputs {
			s, ok := m.Stream(o.Stream)
			if !ok || seen[s.Name] || (s.MaxMsgs == 0 && s.MaxBytes == 0) {
				continue
			}
			seen[s.Name] = true
			out = append(out, location(m.file, m.lineOf(m.streamAt(s.Name).Path))+fmt.Sprintf("stream %s (output of %s): maxMsgs %d / maxBytes %d discard the oldest "+
				"messages; the server rebuilds its message-ID memory after a restart only from messages still "+
				"stored, so an output discarded within the %s duplicate window could be stored again by a "+
				"redelivery. Keep the limits above what the window holds, or leave them unlimited (0).",
				s.Name, f.Name, s.MaxMsgs, s.MaxBytes, s.Duplicates))
		}
	}
	return out
}
