package summarizesession

import (
	"reflect"
	"testing"
	"time"

	"github.com/jetfn/jetfn/events"
)

// seg is a segment of session c1/s1.
func seg(index int, speaker, text string) events.Segment {
	return events.Segment{ConversationID: "c1", SessionID: "s1", Index: index, Speaker: speaker, Text: text}
}

func TestBuildSummary(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		name      string
		published int
		segs      []events.Segment
		want      events.Summary // ID, IDs, times and PublishedSegments are filled in
	}{
		{
			name: "empty session", published: 0,
			want: events.Summary{Segments: 0, Complete: true, WordsPerSpeaker: map[string]int{},
				LongestTurns: []events.Turn{}, Questions: []string{}},
		},
		{
			name: "empty session with segments missing", published: 2,
			want: events.Summary{Complete: false, WordsPerSpeaker: map[string]int{},
				LongestTurns: []events.Turn{}, Questions: []string{}},
		},
		{
			name: "speakers, turns and questions", published: 6,
			segs: []events.Segment{
				seg(0, "Ana", "Hi Ben, can you hear me?"),
				seg(1, "Ben", "Yes."),
				seg(2, "Ben", " Loud and clear. "),
				seg(3, "Ana", "Good. Shall we start with the budget?"),
				seg(4, "Cleo", "Sorry I'm late"),
				seg(5, "Ana", "No problem"),
			},
			want: events.Summary{Segments: 6, Complete: true,
				WordsPerSpeaker: map[string]int{"Ana": 15, "Ben": 4, "Cleo": 3},
				LongestTurns: []events.Turn{
					{Speaker: "Ana", Text: "Good. Shall we start with the budget?", FirstIndex: 3},
					{Speaker: "Ana", Text: "Hi Ben, can you hear me?", FirstIndex: 0},
					{Speaker: "Ben", Text: "Yes. Loud and clear.", FirstIndex: 1},
				},
				Questions: []string{"Hi Ben, can you hear me?", "Good. Shall we start with the budget?"}},
		},
		{
			name: "ties keep the earlier turn", published: 4,
			segs: []events.Segment{seg(0, "A", "one two"), seg(1, "B", "three four"), seg(2, "C", "five six"), seg(3, "D", "seven eight")},
			want: events.Summary{Segments: 4, Complete: true,
				WordsPerSpeaker: map[string]int{"A": 2, "B": 2, "C": 2, "D": 2},
				LongestTurns: []events.Turn{{Speaker: "A", Text: "one two"}, {Speaker: "B", Text: "three four", FirstIndex: 1},
					{Speaker: "C", Text: "five six", FirstIndex: 2}},
				Questions: []string{}},
		},
		{
			name: "a missing segment splits a turn", published: 4,
			segs: []events.Segment{seg(0, "A", "one"), seg(2, "A", "two words"), seg(3, "A", "and more?")},
			want: events.Summary{Segments: 3, Complete: false,
				WordsPerSpeaker: map[string]int{"A": 5},
				LongestTurns:    []events.Turn{{Speaker: "A", Text: "two words and more?", FirstIndex: 2}, {Speaker: "A", Text: "one"}},
				Questions:       []string{"and more?"}},
		},
		{
			name: "speaker names Mongo refuses as keys", published: 2,
			segs: []events.Segment{seg(0, "Dr. Okafor", "Hello all"), seg(1, "$pecial", "Hi")},
			want: events.Summary{Segments: 2, Complete: true,
				WordsPerSpeaker: map[string]int{"Dr\uff0e Okafor": 2, "\uff04pecial": 1},
				LongestTurns:    []events.Turn{{Speaker: "Dr. Okafor", Text: "Hello all"}, {Speaker: "$pecial", Text: "Hi", FirstIndex: 1}},
				Questions:       []string{}},
		},
		{
			name: "more segments than published", published: 1,
			segs: []events.Segment{seg(0, "A", "?"), seg(1, "A", "")},
			want: events.Summary{Segments: 2, Complete: true, WordsPerSpeaker: map[string]int{"A": 1},
				LongestTurns: []events.Turn{{Speaker: "A", Text: "?"}}, Questions: []string{"?"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evt := events.SessionEnded{ConversationID: "c1", SessionID: "s1", PublishedSegments: tt.published}
			got := buildSummary(evt, tt.segs, now)
			want := tt.want
			want.ID, want.ConversationID, want.SessionID = "c1:s1", "c1", "s1"
			want.PublishedSegments, want.UpdatedAt = tt.published, now.UTC()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("summary\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
