package summarizesession

import (
	"slices"
	"strings"
	"time"

	"github.com/jetfn/jetfn/events"
)

// longestTurns is how many turns a summary keeps.
const longestTurns = 3

// buildSummary summarizes a session from its segments, which must be sorted
// by index. The summary is complete when it holds every segment the
// transcriber published. The loaded segments can only outnumber the stable
// count (segments are never deleted), so a late arrival between the count
// and the load only makes the summary more complete.
func buildSummary(evt events.SessionEnded, segs []events.Segment, now time.Time) events.Summary {
	return events.Summary{
		ID:                events.SummaryKey(evt.ConversationID, evt.SessionID),
		ConversationID:    evt.ConversationID,
		SessionID:         evt.SessionID,
		Segments:          len(segs),
		PublishedSegments: evt.PublishedSegments,
		Complete:          len(segs) >= evt.PublishedSegments,
		WordsPerSpeaker:   wordsPerSpeaker(segs),
		LongestTurns:      longest(turns(segs), longestTurns),
		Questions:         questions(segs),
		UpdatedAt:         now.UTC(),
	}
}

// wordsPerSpeaker counts words under events.SpeakerKey, a name Mongo accepts
// as a key.
func wordsPerSpeaker(segs []events.Segment) map[string]int {
	words := map[string]int{}
	for _, s := range segs {
		words[events.SpeakerKey(s.Speaker)] += len(strings.Fields(s.Text))
	}
	return words
}

// turns groups segments into turns: maximal runs by one speaker. A gap in
// the indexes (a segment that never arrived) ends a turn too, since the
// missing segment may have been someone else's.
func turns(segs []events.Segment) []events.Turn {
	var out []events.Turn
	var texts []string
	for i, s := range segs {
		if i == 0 || s.Speaker != segs[i-1].Speaker || s.Index != segs[i-1].Index+1 {
			out = appendTurn(out, texts)
			out = append(out, events.Turn{Speaker: s.Speaker, FirstIndex: s.Index})
			texts = texts[:0]
		}
		if t := strings.TrimSpace(s.Text); t != "" {
			texts = append(texts, t)
		}
	}
	return appendTurn(out, texts)
}

// appendTurn sets the text of the last turn in out, if any.
func appendTurn(out []events.Turn, texts []string) []events.Turn {
	if len(out) > 0 {
		out[len(out)-1].Text = strings.Join(texts, " ")
	}
	return out
}

// longest returns the n turns with the most words, longest first; a tie
// keeps the earlier turn first.
func longest(all []events.Turn, n int) []events.Turn {
	sorted := slices.Clone(all)
	slices.SortStableFunc(sorted, func(a, b events.Turn) int {
		return len(strings.Fields(b.Text)) - len(strings.Fields(a.Text))
	})
	if len(sorted) > n {
		sorted = sorted[:n]
	}
	if sorted == nil {
		return []events.Turn{} // stored as [], not null
	}
	return sorted
}

// questions are the segment texts that end in a question mark, in order.
func questions(segs []events.Segment) []string {
	out := []string{}
	for _, s := range segs {
		if t := strings.TrimSpace(s.Text); strings.HasSuffix(t, "?") {
			out = append(out, t)
		}
	}
	return out
}
