package crash

import (
	"strings"
	"testing"
)

// TestLateTickMustBeARetry: ticks [2 3 4 6 7 5], as a CI run of
// scheduled-tick-kill applied them: tick 5's instance was killed mid-run
// and its retry came after ticks 6 and 7, which the docs allow. The same
// order on tick 5's first delivery would be the function taking ticks out
// of order, and is reported.
func TestLateTickMustBeARetry(t *testing.T) {
	applied := []int64{2, 3, 4, 6, 7, 5}
	runs := func(delivery int64) []orderRun {
		return []orderRun{
			{Key: tickKey, Seq: 2, Delivery: 1, Before: []int64{}},
			{Key: tickKey, Seq: 3, Delivery: 1, Before: []int64{2}},
			{Key: tickKey, Seq: 4, Delivery: 1, Before: []int64{2, 3}},
			{Key: tickKey, Seq: 6, Delivery: 1, Before: []int64{2, 3, 4}},
			{Key: tickKey, Seq: 7, Delivery: 1, Before: []int64{2, 3, 4, 6}},
			{Key: tickKey, Seq: 5, Delivery: delivery, Before: []int64{2, 3, 4, 6, 7}},
		}
	}
	if problems := lateFirstRuns(applied, runs(2)); len(problems) != 0 {
		t.Errorf("a retried tick after newer ones: %v, want no problem", problems)
	}
	problems := lateFirstRuns(applied, runs(1))
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "tick 5 ran after tick 7 on its first delivery") {
		t.Errorf("a first delivery after newer ticks: %v, want tick 5 reported", problems)
	}
	if problems := lateFirstRuns([]int64{1, 2, 3}, nil); len(problems) != 0 {
		t.Errorf("ticks in order: %v, want no problem", problems)
	}
}
