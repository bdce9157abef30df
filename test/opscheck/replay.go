package opscheck

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// replayRec is one dead letter `jetfn dlq replay` republished.
type replayRec struct {
	At        time.Time
	Op        int
	DLSeq     uint64
	Token     string
	MsgID     string
	Stream    string
	StoredSeq uint64
	Duplicate bool
}

// replays is every replay of the run.
type replays struct {
	mu   sync.Mutex
	recs []replayRec
}

func (r *replays) add(rec replayRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
}

func (r *replays) all() []replayRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]replayRec(nil), r.recs...)
}

// replayed reports whether the dead letter at seq was replayed.
func (r *replays) replayed(seq uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if rec.DLSeq == seq {
			return true
		}
	}
	return false
}

// replayLine is a line of `jetfn dlq replay` that republished a dead
// letter (ops/dlq.WriteReplay).
var replayLine = regexp.MustCompile(`^(\d+): replayed to \S+ as (\S+) \((already stored as )?(\S+) sequence (\d+)`)

// replayOp replays dead letters as the op says: one (seq), a function's or
// all of them.
func (s *system) replayOp(ctx context.Context, op Op) (string, error) {
	if err := s.dl.sync(ctx); err != nil {
		return "", err
	}
	args := []string{"dlq", "replay", "--manifest", s.baseManifest()}
	switch op.Replay {
	case "all":
		args = append(args, "--all")
	case "function":
		f, err := s.liveFunction(ctx, op.Family)
		if err != nil {
			return "", err
		}
		args = append(args, "--function", f.Name)
	default:
		live := s.liveDeadLetters()
		if len(live) == 0 {
			return "no dead letter to replay", nil
		}
		args = append(args, strconv.FormatUint(live[op.Pick%len(live)].Seq, 10))
	}
	out, err := s.jetfnCLI(ctx, args...)
	n := s.recordReplays(ctx, op.Index, out)
	if err != nil {
		return "", fmt.Errorf("%d replayed; %w", n, err)
	}
	return fmt.Sprintf("%d replayed", n), nil
}

// liveDeadLetters are the dead letters seen and not replayed yet.
func (s *system) liveDeadLetters() []*deadLetter {
	var out []*deadLetter
	for _, d := range s.dl.all() {
		if !s.replays.replayed(d.Seq) {
			out = append(out, d)
		}
	}
	return out
}

// recordReplays reads the replay's output and records each republished
// dead letter against its input's token: the one the observer read, or,
// for a letter replayed before it was read, the token of the copy stored
// by the replay.
func (s *system) recordReplays(ctx context.Context, op int, out string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		m := replayLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		seq, _ := strconv.ParseUint(m[1], 10, 64)
		stored, _ := strconv.ParseUint(m[5], 10, 64)
		rec := replayRec{At: time.Now(), Op: op, DLSeq: seq, MsgID: m[2], Duplicate: m[3] != "", Stream: m[4], StoredSeq: stored}
		if d := s.dl.get(seq); d != nil {
			rec.Token = d.Token
		} else {
			rec.Token = s.tokenAt(ctx, rec.Stream, stored)
		}
		s.replays.add(rec)
		s.hist.Add(Event{Op: op, Kind: "replayed", Phase: Info, Token: rec.Token,
			Detail: fmt.Sprintf("DEADLETTER:%d as %s to %s:%d duplicate=%v", seq, rec.MsgID, rec.Stream, stored, rec.Duplicate)})
		n++
	}
	return n
}

// tokenAt is the token of the message stored at stream:seq.
func (s *system) tokenAt(ctx context.Context, stream string, seq uint64) string {
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		return ""
	}
	if tok := m.Header.Get(tokenHeader); tok != "" {
		return tok
	}
	return tokenOfPayload(m.Data)
}
