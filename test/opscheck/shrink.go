package opscheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Shrink looks for a shorter nemesis that still breaks the promise want
// names (a kind of violation; empty: the failing run's first): it drops chunks of
// nemesis operations, halving the chunk when no drop keeps the failure
// (delta debugging), and runs each candidate on a fresh system with the
// same seed and publishes. budget bounds the runs. Timing varies between
// runs, so a candidate that passes once is not proof that its operations
// are needed; the result is a smaller reproduction, not a minimal one.
func Shrink(ctx context.Context, opts Options, failed *Result, want string, budget int) (*Result, error) {
	if failed.OK() {
		return failed, nil
	}
	if want == "" {
		want = failed.Violations[0].What
	}
	if !failed.has(want) {
		return failed, fmt.Errorf("shrinking: the run showed no %q to keep", want)
	}
	keep := failed.Schedule.Nemesis()
	best := failed
	chunk := max(len(keep)/2, 1)
	for try := 0; try < budget && len(keep) > 0; {
		shrunk := false
		for i := 0; i < len(keep) && try < budget; i += chunk {
			// Not nil even when empty: a nil Keep runs every operation.
			cand := append(append([]int{}, keep[:i]...), keep[min(i+chunk, len(keep)):]...)
			res, err := runKept(ctx, opts, failed.Schedule, cand, try)
			try++
			if err != nil {
				return best, err
			}
			opts.Log.Info("opscheck: shrinking", "try", try, "ops", len(cand), "still fails", res.has(want))
			if res.has(want) {
				keep, best, shrunk = cand, res, true
				break
			}
		}
		if !shrunk {
			if chunk == 1 {
				break
			}
			chunk = max(chunk/2, 1)
		}
	}
	return best, nil
}

func (r *Result) has(what string) bool {
	return slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.What == what })
}

// runKept runs sched with only the nemesis operations in keep, in a
// directory of its own.
func runKept(ctx context.Context, opts Options, sched *Schedule, keep []int, try int) (*Result, error) {
	s := *sched
	s.Keep = keep
	opts.Dir = filepath.Join(opts.Dir, fmt.Sprintf("shrink-%d", try))
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	return RunSchedule(ctx, opts, &s)
}

// Nemesis lists the indexes of the nemesis operations the schedule runs.
func (s *Schedule) Nemesis() []int {
	var out []int
	for _, op := range s.Ops {
		if op.Kind != KPublish && s.runs(op.Index) {
			out = append(out, op.Index)
		}
	}
	return out
}

// runs reports whether the nemesis operation at i is kept.
func (s *Schedule) runs(i int) bool { return s.Keep == nil || slices.Contains(s.Keep, i) }
