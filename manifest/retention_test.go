package manifest

import (
	"strings"
	"testing"
)

// TestInputStreamRetention is issue 29, item 8: a stream a function reads
// with retention interest or workqueue lost messages when the function's
// consumer was deleted or pruned (interest: a message no consumer wants
// is dropped at once, while its publisher gets a PubAck), and jetfn took
// such a manifest. Now check refuses it at the stream's retention line.
// Before the fix both cases validated.
func TestInputStreamRetention(t *testing.T) {
	for _, retention := range []string{"interest", "workqueue"} {
		t.Run(retention, func(t *testing.T) {
			m, err := Parse([]byte(`
streams:
  - name: TEST
    subjects: ["test.>"]
    retention: ` + retention + `
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - {name: fn, version: 1.0.0, stream: TEST, subject: test.in}
`))
			if err != nil {
				t.Fatal(err)
			}
			err = m.Validate([]string{"fn"})
			if err == nil || !strings.Contains(err.Error(), "line 5: streams[0] (TEST).retention:") ||
				!strings.Contains(err.Error(), "function fn reads it") {
				t.Fatalf("Validate = %v, want a refusal at the retention line naming fn", err)
			}
		})
	}
}

// TestProductionTranscriptionBounded is issue 29's low item: production.yaml
// kept every transcription.segment on TRANSCRIPTION forever (no maxAge),
// though nothing in jetfn reads them from the stream (summarize-session
// counts segments in Mongo). Its maxAge must bound them, and still cover
// the duplicate window (which check enforces too: a restarted server
// rebuilds its message-ID memory from what it stores) and, with the same
// margin of two, the redelivery horizon of every function that reads the
// stream, so no message expires before its last delivery.
func TestProductionTranscriptionBounded(t *testing.T) {
	m, err := Load("../manifests/production.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(known); err != nil {
		t.Fatal(err)
	}
	s, ok := m.Stream("TRANSCRIPTION")
	if !ok {
		t.Fatal("production.yaml declares no TRANSCRIPTION stream")
	}
	if s.MaxAge == 0 {
		t.Fatal("TRANSCRIPTION has no maxAge: it stores every segment forever")
	}
	if s.MaxAge < s.Duplicates {
		t.Errorf("TRANSCRIPTION maxAge %s is shorter than its duplicate window %s", s.MaxAge, s.Duplicates)
	}
	for _, h := range m.Horizons() {
		f, _ := m.Function(h.Function)
		if f.Stream == s.Name && s.MaxAge < 2*h.Total() {
			t.Errorf("TRANSCRIPTION maxAge %s is shorter than twice %s's redelivery horizon %s", s.MaxAge, f.Name, h.Total())
		}
	}
}
