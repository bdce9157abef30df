package manifest

import (
	"strings"
	"testing"
)

// TestDelayedOutput: a delayed output's stream must store the subjects
// where it waits, and gets the server features it needs.
func TestDelayedOutput(t *testing.T) {
	delayed := strings.Replace(validManifest, "    concurrency: 4\n",
		"    concurrency: 4\n    outputs:\n      - subject: transcript.processed\n        stream: TRANSCRIPTION\n        delayed: true\n", 1)
	m, err := Parse([]byte(delayed))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(known); err != nil {
		t.Fatalf("a delayed output on a stream storing transcript.>: %v", err)
	}
	if s, _ := m.Stream("TRANSCRIPTION"); !s.AllowSchedules || !s.AllowAtomic {
		t.Errorf("stream %+v: want schedules and atomic batches on", s)
	}
	narrow := strings.Replace(delayed, `["transcription.>", "transcript.>"]`, `["transcription.>", "transcript.processed"]`, 1)
	if m, err = Parse([]byte(narrow)); err != nil {
		t.Fatal(err)
	}
	want := "stream TRANSCRIPTION must also store transcript.processed.jetfn-delay.>"
	if err := m.Validate(known); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ".delayed:") {
		t.Fatalf("err = %v, want %q at the delayed key", err, want)
	}
}
