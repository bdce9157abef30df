package manifest

import (
	"testing"
	"time"
)

// TestDebounceValidation: every mistake in a debounced function's
// declaration is named at its line, with what to write instead.
func TestDebounceValidation(t *testing.T) {
	tests := []struct{ name, lines, want string }{
		{"without a key", "    debounce: 5s", "line 17: functions[0] (summarize-session).debounce: needs key: where each message's key is"},
		{"too short", "    key: {token: 2}\n    debounce: 500ms", "debounce: 500ms is shorter than 1s"},
		{"with ordered", "    key: {token: 2}\n    ordered: true\n    debounce: 5s", "cannot be combined with ordered or keyConcurrency: a debounced function already runs"},
		{"a literal token", "    key: {token: 1}\n    debounce: 5s", "token 1 of subject transcription.*.ended is not a *"},
		{"renamed", "    key: {token: 2}\n    debounce: 5s\n    renamedFrom: old", "renamedFrom: a debounced function cannot be renamed yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantRefused(t, keyedManifest(tt.lines), tt.want) })
	}
}

// TestDebounceStreamAndRunner: a debounced function's debounce stream
// keeps receipts (TTL), schedules and atomic batches for as long as an
// input can come again, and its runner reads the due runs with the
// function's settings.
func TestDebounceStreamAndRunner(t *testing.T) {
	m, err := Parse([]byte(keyedManifest("    key: {header: Session}\n    debounce: 5s")))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(known); err != nil {
		t.Fatal(err)
	}
	f := m.Functions[0]
	s := m.DebounceStream(f)
	if s.Name != "JETFN_DEBOUNCE_summarize-session" || !s.AllowSchedules || !s.AllowAtomic || !s.AllowTTL || s.Retention != "workqueue" {
		t.Errorf("debounce stream %+v", s)
	}
	if want := 2 * (f.MaxOutage + time.Duration(f.MaxDeliver)*f.AckWait); s.Duplicates != want {
		t.Errorf("duplicate window %s, want %s", s.Duplicates, want)
	}
	if f.Partitions != f.Concurrency {
		t.Errorf("%d partitions, want the concurrency %d", f.Partitions, f.Concurrency)
	}
	r := f.DebouncedPartition(3)
	if r.Stream != s.Name || len(r.Subjects) != 1 || r.Subjects[0] != "jetfn.debounce.summarize-session.run.3.*" ||
		r.Durable != f.Durable+"-p003" || r.Concurrency != 1 || r.MaxAckPending != 1 {
		t.Errorf("runner of partition 3 %+v", r)
	}
	if f.DebouncerDurable() != "summarize-session-debouncer" {
		t.Errorf("debouncer durable %s", f.DebouncerDurable())
	}
}
