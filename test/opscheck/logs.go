package opscheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jetfn/jetfn/internal/textfit"
)

// notableLogs are the instance log messages the history keeps: what each
// instance did with a revision and with its consumers. (Dead letters come
// from the stream itself.)
var notableLogs = []string{
	"applied deployment revision", "refused manifest revision", "refused deployment revision",
	"consumer was configured by another manifest", "recreated a deleted consumer", "consumer missing",
	"pruned a removed function's consumer", "created consumer", "runtime ready",
}

// logLine is the part of a jetfn JSON log line the history shows.
type logLine struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	Function string    `json:"function"`
	Consumer string    `json:"consumer"`
	Revision *uint64   `json:"revision"`
	StartSeq *uint64   `json:"start_seq"`
	Err      string    `json:"err"`
}

// readInstanceLogs adds each instance's notable log lines to the history,
// stamped with the instance's own time.
func (s *system) readInstanceLogs() {
	for _, in := range s.instances {
		f, err := os.Open(in.logPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) != nil || !notable(l.Msg) {
				continue
			}
			s.hist.Add(Event{At: l.Time, Op: -1, Kind: in.name() + " log", Phase: Info, Detail: l.String()})
		}
		_ = f.Close()
	}
}

func notable(msg string) bool {
	for _, n := range notableLogs {
		if strings.HasPrefix(msg, n) {
			return true
		}
	}
	return false
}

func (l logLine) String() string {
	out := l.Msg
	if l.Function != "" {
		out += " function=" + l.Function
	}
	if l.Consumer != "" {
		out += " consumer=" + l.Consumer
	}
	if l.Revision != nil {
		out += fmt.Sprintf(" revision=%d", *l.Revision)
	}
	if l.StartSeq != nil {
		out += fmt.Sprintf(" start_seq=%d", *l.StartSeq)
	}
	if l.Err != "" {
		out += " err=" + textfit.Truncate(l.Err, 240)
	}
	return out
}
