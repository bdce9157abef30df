package simulate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/simulate"
)

// TestSummaries lists summaries stored on the embedded FerretDB, newest
// first, shows one in full and as JSON, and says when there are none.
func TestSummaries(t *testing.T) {
	_, client := runtimetest.StartMongo(t)
	db := client.Database("summaries")
	ctx := context.Background()
	var out bytes.Buffer
	if err := simulate.Summaries(ctx, db, &out, simulate.SummariesOptions{}); err != nil || !strings.Contains(out.String(), "no summaries stored yet") {
		t.Fatalf("empty: %v\n%s", err, out.String())
	}
	at := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	for i, s := range []events.Summary{
		{ID: "c1:s1", ConversationID: "c1", SessionID: "s1", Segments: 12, PublishedSegments: 12, Complete: true,
			WordsPerSpeaker: map[string]int{"Ana": 30, events.SpeakerKey("Dr. Okafor"): 40}, UpdatedAt: at},
		{ID: "c2:s2", ConversationID: "c2", SessionID: "s2", Segments: 3, PublishedSegments: 5,
			WordsPerSpeaker: map[string]int{"Ben": 4}, Questions: []string{"Ready?"}, UpdatedAt: at.Add(time.Minute)},
	} {
		if _, err := db.Collection(events.SummariesCollection).InsertOne(ctx, s); err != nil {
			t.Fatalf("storing summary %d: %v", i, err)
		}
	}

	out.Reset()
	if err := simulate.Summaries(ctx, db, &out, simulate.SummariesOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "s2") || !strings.Contains(lines[1], "3 of 5") ||
		!strings.Contains(lines[1], "INCOMPLETE") || !strings.Contains(lines[2], "Dr. Okafor, Ana") {
		t.Errorf("table:\n%s\nwant a header, s2 (newest, 3 of 5, INCOMPLETE), then s1 with its speakers by words", out.String())
	}

	out.Reset()
	if err := simulate.Summaries(ctx, db, &out, simulate.SummariesOptions{Limit: 1}); err != nil || strings.Count(out.String(), "\n") != 2 {
		t.Errorf("--limit 1: %v\n%s\nwant the header and one row", err, out.String())
	}

	out.Reset()
	if err := simulate.Summaries(ctx, db, &out, simulate.SummariesOptions{Session: "s2"}); err != nil ||
		!strings.Contains(out.String(), "Session s2 (conversation c2): 3 of 5 segments, INCOMPLETE") || !strings.Contains(out.String(), "- Ready?") {
		t.Errorf("--session s2: %v\n%s", err, out.String())
	}

	out.Reset()
	if err := simulate.Summaries(ctx, db, &out, simulate.SummariesOptions{Session: "s1", JSON: true}); err != nil {
		t.Fatal(err)
	}
	var got events.Summary
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.ID != "c1:s1" || got.WordsPerSpeaker["Ana"] != 30 {
		t.Errorf("--json: %v, %+v", err, got)
	}

	if err := simulate.Summaries(ctx, db, &out, simulate.SummariesOptions{Session: "nope"}); !errors.Is(err, simulate.ErrNoSummary) {
		t.Errorf("unknown session: %v, want ErrNoSummary", err)
	}
}
