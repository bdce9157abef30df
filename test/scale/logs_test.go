package scale

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// summarizedMsg is what summarize-session logs, at info level, once a
// session's summary is stored and announced (before the ack).
const summarizedMsg = "session summarized"

// handled is one "session summarized" line.
type handled struct {
	At           time.Time
	Key          string
	NumDelivered uint64
}

// logLine is the part of a JSON log line the tests read.
type logLine struct {
	Time         time.Time `json:"time"`
	Level        string    `json:"level"`
	Msg          string    `json:"msg"`
	Conv         string    `json:"conversation_id"`
	Sess         string    `json:"session_id"`
	NumDelivered uint64    `json:"num_delivered"`
	Err          string    `json:"err"`
}

// logRecord collects what the tests want from a JSON log: every handled
// session, and how often each warning or error was logged.
type logRecord struct {
	mu       sync.Mutex
	partial  []byte
	handled  []handled
	problems map[string]int
}

// Write takes log output, possibly in pieces, one JSON object per line.
func (r *logRecord) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = append(r.partial, p...)
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		r.addLine(r.partial[:i])
		r.partial = r.partial[i+1:]
	}
}

func (r *logRecord) addLine(raw []byte) {
	var l logLine
	if json.Unmarshal(raw, &l) != nil {
		return
	}
	switch {
	case l.Msg == summarizedMsg:
		r.handled = append(r.handled, handled{At: l.Time, Key: l.Conv + ":" + l.Sess, NumDelivered: l.NumDelivered})
	case l.Level == "WARN" || l.Level == "ERROR":
		if r.problems == nil {
			r.problems = map[string]int{}
		}
		key := l.Level + " " + l.Msg
		if l.Err != "" {
			key += ": " + l.Err
		}
		r.problems[key]++
	}
}

// Handled returns the handled sessions whose key starts with prefix.
func (r *logRecord) Handled(prefix string) []handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []handled
	for _, h := range r.handled {
		if strings.HasPrefix(h.Key, prefix) {
			out = append(out, h)
		}
	}
	return out
}

// Count is how many sessions were handled so far.
func (r *logRecord) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handled)
}

// Problems is a copy of the warning and error counts, by level and message.
func (r *logRecord) Problems() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.problems))
	for k, v := range r.problems {
		out[k] = v
	}
	return out
}

// readLog parses a child's log file.
func readLog(path string) (*logRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &logRecord{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		r.addLine(sc.Bytes())
	}
	return r, sc.Err()
}

// redelivered counts handled lines from a delivery after the first.
func redelivered(hs []handled) int {
	n := 0
	for _, h := range hs {
		if h.NumDelivered > 1 {
			n++
		}
	}
	return n
}

// largestGap is the longest time in [from, to] without a handled session:
// from itself counts as the first mark, so a stall that begins at a kill is
// measured from the kill.
func largestGap(hs []handled, from, to time.Time) time.Duration {
	marks := []time.Time{from}
	for _, h := range hs {
		if h.At.After(from) && h.At.Before(to) {
			marks = append(marks, h.At)
		}
	}
	marks = append(marks, to)
	slices.SortFunc(marks, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	for i := 1; i < len(marks); i++ {
		gap = max(gap, marks[i].Sub(marks[i-1]))
	}
	return gap
}
