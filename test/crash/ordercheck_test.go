package crash

import (
	"strings"
	"testing"

	"github.com/jetfn/jetfn"
)

// orderFixture is two keys, a at sequences 1, 3, 5 and b at 2, 4, with
// every effect, run and output in order: what a good row leaves, including
// a failed run and a repeat after a SIGKILL.
func orderFixture() ([]orderInput, orderEffects) {
	inputs := []orderInput{{"a", 1, "m1"}, {"b", 2, "m2"}, {"a", 3, "m3"}, {"b", 4, "m4"}, {"a", 5, "m5"}}
	e := orderEffects{
		Applied: map[string][]int64{"a": {1, 3, 5}, "b": {2, 4}},
		Runs: []orderRun{
			{Key: "a", Seq: 1, Delivery: 1, Before: []int64{}},
			{Key: "b", Seq: 2, Delivery: 1, Before: []int64{}},
			{Key: "a", Seq: 3, Delivery: 1, Failed: true, Before: []int64{1}},
			{Key: "a", Seq: 3, Delivery: 2, Before: []int64{1}},
			{Key: "a", Seq: 3, Delivery: 3, Before: []int64{1, 3}}, // a repeat
			{Key: "b", Seq: 4, Delivery: 1, Before: []int64{2}},
			{Key: "a", Seq: 5, Delivery: 1, Before: []int64{1, 3}},
		},
	}
	for _, in := range inputs {
		id, _ := jetfn.OutputMsgID(orderedFunction, recordedSubject, in.MsgID)
		e.Outputs = append(e.Outputs, orderOutput{Key: in.Key, Seq: in.Seq, MsgID: id})
	}
	return inputs, e
}

// TestCheckOrderPasses: the fixture is judged in order, each once, with
// its repeat and failed run counted.
func TestCheckOrderPasses(t *testing.T) {
	inputs, e := orderFixture()
	v := checkOrder(orderedFunction, inputs, e)
	if len(v.Violations) > 0 {
		t.Fatalf("violations in an ordered row: %v", v.Violations)
	}
	if v.Runs != 7 || v.Repeats != 1 || v.Failed != 1 {
		t.Errorf("runs %d, repeats %d, failed %d; want 7, 1, 1", v.Runs, v.Repeats, v.Failed)
	}
	for i, r := range v.Results {
		if r.Summaries != 1 || r.Notifications != 1 {
			t.Errorf("input %d: %d effects and %d outputs, want 1 and 1", i, r.Summaries, r.Notifications)
		}
	}
}

// TestCheckOrderFails: every way a row breaks per-key order or "each
// once" is reported, each by itself.
func TestCheckOrderFails(t *testing.T) {
	cases := []struct {
		name             string
		spoil            func(e *orderEffects)
		want             string // in a violation; empty wants counts only
		input            int    // whose counts change, with want counts below
		effects, outputs int
	}{
		{name: "effects out of order", spoil: func(e *orderEffects) { e.Applied["a"] = []int64{1, 5, 3} },
			want: "key a: effect of seq 3 after that of seq 5", input: -1},
		{name: "a later message overtaking a failing one", spoil: func(e *orderEffects) {
			e.Runs = append(e.Runs, orderRun{Key: "a", Seq: 5, Delivery: 1, Before: []int64{1}})
		}, want: "key a: seq 5 ran (delivery 1) before seq 3 had its effect", input: -1},
		{name: "a run after a later effect", spoil: func(e *orderEffects) {
			e.Runs = append(e.Runs, orderRun{Key: "a", Seq: 3, Delivery: 4, Before: []int64{1, 3, 5}})
		}, want: "key a: seq 3 ran (delivery 4) after the effect of seq 5", input: -1},
		{name: "a failed run while an earlier message had no effect", spoil: func(e *orderEffects) {
			e.Runs = append(e.Runs, orderRun{Key: "b", Seq: 4, Delivery: 1, Failed: true, Before: []int64{}})
		}, want: "key b: seq 4 ran (delivery 1) before seq 2 had its effect", input: -1},
		{name: "an effect twice", spoil: func(e *orderEffects) { e.Applied["b"] = []int64{2, 2, 4} },
			want: "key b: seq 2 has two effects", input: -1},
		{name: "an effect on the wrong key", spoil: func(e *orderEffects) { e.Applied["b"] = []int64{2, 3, 4} },
			want: "key b: effect of seq 3, which was not published on it", input: -1},
		{name: "a lost effect", spoil: func(e *orderEffects) { e.Applied["a"] = []int64{1, 5} },
			input: 2, effects: 0, outputs: 1},
		{name: "an output twice", spoil: func(e *orderEffects) { e.Outputs = append(e.Outputs, e.Outputs[3]) },
			input: 3, effects: 1, outputs: 2},
		{name: "outputs out of order", spoil: func(e *orderEffects) { e.Outputs[0], e.Outputs[2] = e.Outputs[2], e.Outputs[0] },
			want: "key a: the output of seq 1 stored after that of seq 3", input: -1},
		{name: "an output with another ID", spoil: func(e *orderEffects) { e.Outputs[1].MsgID = "m2" },
			want: `key b: the output of seq 2 has message ID "m2"`, input: -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inputs, e := orderFixture()
			c.spoil(&e)
			v := checkOrder(orderedFunction, inputs, e)
			if c.want != "" {
				if len(v.Violations) != 1 || !strings.Contains(v.Violations[0], c.want) {
					t.Errorf("violations %q, want one with %q", v.Violations, c.want)
				}
			} else if len(v.Violations) != 0 {
				t.Errorf("violations %q, want none (the counts show it)", v.Violations)
			}
			for i, r := range v.Results {
				effects, outputs := 1, 1
				if i == c.input {
					effects, outputs = c.effects, c.outputs
				}
				if r.Summaries != effects || r.Notifications != outputs {
					t.Errorf("input %d: %d effects and %d outputs, want %d and %d", i, r.Summaries, r.Notifications, effects, outputs)
				}
			}
		})
	}
}
