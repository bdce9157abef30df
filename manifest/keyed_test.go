package manifest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// keyedManifest is validManifest with its function reading
// transcription.<session>.ended, keyed by the session, with lines added.
func keyedManifest(lines string) string {
	return strings.Replace(strings.Replace(validManifest, "subject: transcription.session-ended", "subject: transcription.*.ended", 1),
		"    concurrency: 4", "    concurrency: 4\n"+lines, 1)
}

// TestKeyedValidation: every mistake in a keyed function's declaration is
// named at its line, with what to write instead.
func TestKeyedValidation(t *testing.T) {
	tests := []struct{ name, lines, want string }{
		{"ordered without a key", "    ordered: true", "line 8: functions[0] (summarize-session).key: required with ordered or keyConcurrency"},
		{"a key nothing uses", "    key: {token: 2}", "key: nothing uses it: add ordered: true"},
		{"ordered and keyConcurrency", "    key: {token: 2}\n    ordered: true\n    keyConcurrency: 2", "give ordered or keyConcurrency, not both"},
		{"a literal token", "    key: {token: 1}\n    ordered: true", "token 1 of subject transcription.*.ended is not a *"},
		{"a token past the subject", "    key: {token: 4}\n    ordered: true", "token 4 of subject transcription.*.ended is not a *"},
		{"two key sources", "    key: {token: 2, field: sessionId}\n    ordered: true", "give exactly one of token (a subject token), header or field"},
		{"a header key that is no header name", "    key: {header: \"Session Id\"}\n    ordered: true", `header "Session Id" is not a header name`},
		{"too many partitions", "    key: {token: 2}\n    ordered: true\n    partitions: 2000", "partitions: 2000 must be from 1 to 1024"},
		{"partitions unkeyed", "    partitions: 8", "only a keyed function (ordered or keyConcurrency) or a debounced one has partitions"},
		{"a key rate unkeyed", "    keyRateLimit: 5/s", "line 17: functions[0] (summarize-session).keyRateLimit: only a keyed function"},
		{"a key rate too slow", "    key: {token: 2}\n    ordered: true\n    keyRateLimit: 1/48h", "keyRateLimit: 1/48h0m0s: want at least 1 message per"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantRefused(t, keyedManifest(tt.lines), tt.want) })
	}
}

// wantRefused checks that doc parses and that Validate refuses it with an
// error containing want.
func wantRefused(t *testing.T, doc, want string) {
	t.Helper()
	m, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err = m.Validate(known); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// TestKeyedDefaultsAndPartitions: an ordered function gets one partition
// per worker, each a consumer of one message at a time on the keyed
// stream, and a keyed stream that copies the input through the server's
// partition transform of the key's wildcard.
func TestKeyedDefaultsAndPartitions(t *testing.T) {
	m, err := Parse([]byte(keyedManifest("    key: {token: 2}\n    ordered: true\n    start: new")))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(known); err != nil {
		t.Fatal(err)
	}
	f := m.Functions[0]
	if f.Partitions != 4 || f.PerKey() != 1 {
		t.Fatalf("partitions %d, perKey %d; want 4 (concurrency) and 1", f.Partitions, f.PerKey())
	}
	p := f.Partition(3)
	if p.Stream != "JETFN_KEYED_summarize-session" || p.Durable != "summarize-session-p003" ||
		fmt.Sprint(p.FilterSubjects()) != "[3.>]" || p.MaxAckPending != 1 || p.Concurrency != 1 || *p.Prefetch != 0 {
		t.Fatalf("partition 3: %+v", p)
	}
	now := time.Now()
	ks := m.KeyedStream(f, now)
	want := Transform{Source: "transcription.*.ended", Destination: "{{partition(4,1)}}.transcription.{{wildcard(1)}}.ended"}
	if ks.Retention != "workqueue" || ks.Source == nil || ks.Source.Stream != "TRANSCRIPTION" ||
		fmt.Sprint(ks.Source.Transforms) != fmt.Sprint([]Transform{want}) || !ks.Source.StartTime.Equal(now) {
		t.Fatalf("keyed stream: %+v, source %+v", ks, ks.Source)
	}
}
