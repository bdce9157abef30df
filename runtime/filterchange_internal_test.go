package runtime

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiffFilters(t *testing.T) {
	tests := []struct {
		name               string
		have, want         []string
		added, wantRemoved []string
	}{
		{name: "same", have: []string{"a.x"}, want: []string{"a.x"}},
		{name: "added", have: []string{"a.x"}, want: []string{"a.x", "a.y"}, added: []string{"a.y"}},
		{name: "removed", have: []string{"a.x", "a.y"}, want: []string{"a.x"}, wantRemoved: []string{"a.y"}},
		{name: "narrowed wildcard", have: []string{"a.*"}, want: []string{"a.x"}, wantRemoved: []string{"a.*"}},
		{name: "widened wildcard", have: []string{"a.x"}, want: []string{"a.*"}, added: []string{"a.*"}, wantRemoved: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diffFilters(tt.have, tt.want)
			if !cmp.Equal(got.added, tt.added) || !cmp.Equal(got.removed, tt.wantRemoved) {
				t.Errorf("diffFilters = +%v -%v, want +%v -%v", got.added, got.removed, tt.added, tt.wantRemoved)
			}
		})
	}
}

func TestPlanFilterChange(t *testing.T) {
	tests := []struct {
		name       string
		have, want []string
		meta       map[string]string
		delivered  uint64
		start      uint64
		wantMeta   map[string]string
		wantPlan   *backfillPlan
	}{
		{name: "narrowed: the dropped subject is noted", have: []string{"a.x", "a.y"}, want: []string{"a.x"},
			meta: map[string]string{}, delivered: 40, start: 1,
			wantMeta: map[string]string{handledThroughPrefix + "a.y": "40"}},
		{name: "added back: resumes after the note", have: []string{"a.x"}, want: []string{"a.x", "a.y"},
			meta: map[string]string{handledThroughPrefix + "a.y": "40"}, delivered: 90, start: 1, wantMeta: map[string]string{},
			wantPlan: &backfillPlan{from: map[string]uint64{"a.y": 41}, skip: []skipRange{{Subject: "a.x"}}}},
		{name: "never read, start all", have: []string{"a.x"}, want: []string{"a.x", "a.y"},
			meta: map[string]string{}, delivered: 90, start: 1, wantMeta: map[string]string{},
			wantPlan: &backfillPlan{from: map[string]uint64{"a.y": 1}, skip: []skipRange{{Subject: "a.x"}}}},
		{name: "never read, start new", have: []string{"a.x"}, want: []string{"a.x", "a.y"},
			meta: map[string]string{}, delivered: 90, start: 0, wantMeta: map[string]string{}},
		{name: "added inside a noted wildcard: after its note, even with start new", have: []string{"b.x"}, want: []string{"b.x", "a.y"},
			meta: map[string]string{handledThroughPrefix + "a.*": "40"}, delivered: 90, start: 0,
			wantMeta: map[string]string{handledThroughPrefix + "a.*": "40"},
			wantPlan: &backfillPlan{from: map[string]uint64{"a.y": 41}, skip: []skipRange{{Subject: "b.x"}}}},
		{name: "a wildcard added over a noted subject: skips what that note covers", have: []string{"b.x"}, want: []string{"b.x", "a.*"},
			meta: map[string]string{handledThroughPrefix + "a.y": "40"}, delivered: 90, start: 1, wantMeta: map[string]string{},
			wantPlan: &backfillPlan{from: map[string]uint64{"a.*": 1}, skip: []skipRange{{Subject: "b.x"}, {Subject: "a.y", Through: 40}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta := maps.Clone(tt.meta)
			got := planFilterChange(diffFilters(tt.have, tt.want), tt.have, meta, tt.delivered, tt.start)
			if !maps.Equal(meta, tt.wantMeta) {
				t.Errorf("metadata %v, want %v", meta, tt.wantMeta)
			}
			if diff := cmp.Diff(tt.wantPlan, got, cmp.AllowUnexported(backfillPlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFoldBackfill: a filter change while a backfill still runs carries
// what it had left into the new one, or into a note.
func TestFoldBackfill(t *testing.T) {
	old := backfillRange{from: map[string]uint64{"a.y": 10}, skip: []skipRange{{Subject: "a.x"}}, through: 50}
	t.Run("the subject stays", func(t *testing.T) {
		meta := map[string]string{}
		got := foldBackfill(nil, old, 30, []string{"a.x", "a.y"}, []string{"a.x", "a.y"}, meta)
		want := &backfillPlan{from: map[string]uint64{"a.y": 31},
			skip: []skipRange{{Subject: "a.x"}, {Subject: "a.y", From: 51}, {Subject: "a.x", Through: 50}}}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(backfillPlan{})); diff != "" {
			t.Errorf("plan (-want +got):\n%s", diff)
		}
	})
	t.Run("the subject is dropped", func(t *testing.T) {
		meta := map[string]string{}
		if got := foldBackfill(nil, old, 30, []string{"a.x"}, []string{"a.x", "a.y"}, meta); got != nil {
			t.Errorf("plan %+v, want none", got)
		}
		if want := map[string]string{handledThroughPrefix + "a.y": "30"}; !maps.Equal(meta, want) {
			t.Errorf("metadata %v, want %v", meta, want)
		}
	})
	t.Run("already handed over", func(t *testing.T) {
		if got := foldBackfill(nil, old, 50, []string{"a.x", "a.y"}, []string{"a.x", "a.y"}, map[string]string{}); got != nil {
			t.Errorf("plan %+v, want none", got)
		}
	})
}

func TestBackfillRangeHands(t *testing.T) {
	r := backfillRange{from: map[string]uint64{"a.y": 10, "b.*": 1}, through: 50,
		skip: []skipRange{{Subject: "a.x"}, {Subject: "b.z", Through: 20}, {Subject: "a.y", From: 41}}}
	tests := []struct {
		subject string
		seq     uint64
		want    bool
	}{
		{"a.y", 10, true},
		{"a.y", 9, false},  // before its first sequence
		{"a.y", 41, false}, // the main consumer delivered it
		{"a.y", 51, false}, // past the end
		{"a.x", 12, false}, // the old filter delivered it
		{"b.z", 20, false}, // a note covers it
		{"b.z", 21, true},  // after the note
		{"c.q", 12, false}, // not an added subject
	}
	for _, tt := range tests {
		if got := r.hands(tt.subject, tt.seq); got != tt.want {
			t.Errorf("hands(%s, %d) = %v, want %v", tt.subject, tt.seq, got, tt.want)
		}
	}
}
