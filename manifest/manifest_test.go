package manifest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const validManifest = `
streams:
  - name: TRANSCRIPTION
    subjects: ["transcription.>", "transcript.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: summarize-session
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.session-ended
    ackWait: 6s
    maxDeliver: 5
    heartbeat: 2s
    backoff: [1s, 5s]
    concurrency: 4
    config:
      quiet: 2s
`

var known = []string{"publish-recording-event", "report-summaries", "summarize-session"}

func TestManifestDefaults(t *testing.T) {
	m, err := Parse([]byte(validManifest))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(known); err != nil {
		t.Fatal(err)
	}
	f := m.Functions[0]
	if f.Durable != "summarize-session" || f.MaxAckPending != DefaultMaxAckPending || f.Timeout != DefaultTimeout {
		t.Errorf("function defaults %+v", f)
	}
	if s := m.Streams[0]; s.Duplicates != 24*time.Hour || s.Storage != "file" || s.Replicas != 1 {
		t.Errorf("stream defaults %+v", s)
	}
	if m.DeadLetter.Stream != "DEADLETTER" || m.DeadLetterSubject("x") != "deadletter.x" {
		t.Errorf("dead letter defaults %+v", m.DeadLetter)
	}
	var cfg struct {
		Quiet     time.Duration `yaml:"quiet"`
		MaxRounds int           `yaml:"maxRounds"`
	}
	cfg.MaxRounds = 5
	if err := f.Config.Decode(&cfg); err != nil || cfg.Quiet != 2*time.Second || cfg.MaxRounds != 5 {
		t.Errorf("config %+v, %v; want quiet 2s and the default maxRounds kept", cfg, err)
	}
}

func TestManifestStrictDecoding(t *testing.T) {
	_, err := Parse([]byte(strings.Replace(validManifest, "    concurrency: 4", "    concurency: 4", 1)))
	if err == nil || !strings.Contains(err.Error(), "line 16") || !strings.Contains(err.Error(), "concurency") {
		t.Fatalf("err = %v, want the unknown key and its line", err)
	}
}

func TestManifestValidation(t *testing.T) {
	tests := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{name: "unknown function lists the known ones",
			edit: replace("name: summarize-session", "name: summarise"),
			want: []string{`functions[0] (summarise).name: unknown function "summarise"; this binary has: publish-recording-event, report-summaries, summarize-session`}},
		{name: "subject outside the stream",
			edit: replace("subject: transcription.session-ended", "subject: recording.started"),
			want: []string{"functions[0] (summarize-session).subject: recording.started is not covered by stream TRANSCRIPTION"}},
		{name: "heartbeat above half of ackWait",
			edit: replace("heartbeat: 2s", "heartbeat: 4s"),
			want: []string{"heartbeat: 4s must be positive and at most half of ackWait 6s (3s)"}},
		{name: "heartbeat not below ackWait",
			edit: replace("heartbeat: 2s", "heartbeat: 6s"),
			want: []string{"heartbeat: 6s must be positive and at most half of ackWait 6s (3s)"}},
		{name: "backoff longer than maxDeliver",
			edit: replace("backoff: [1s, 5s]", "backoff: [1s, 2s, 3s, 4s, 5s, 6s]"),
			want: []string{"backoff: 6 entries but maxDeliver is 5"}},
		{name: "rate limit faster than a message a microsecond",
			edit: replace("    concurrency: 4", "    concurrency: 4\n    rateLimit: 2000000/1ms"),
			want: []string{`rateLimit: 2000000/1ms: want at least 1 message per at least 1ms, at most 1,000,000 a second and at least 1 a day`}},
		{name: "rate limit slower than a message a day",
			edit: replace("    concurrency: 4", "    concurrency: 4\n    rateLimit: 1/48h"),
			want: []string{`rateLimit: 1/48h0m0s: want at least 1 message per`}},
		{name: "rate limit of no messages",
			edit: replace("    concurrency: 4", "    concurrency: 4\n    rateLimit: 0/s"),
			want: []string{`rateLimit: 0/s: want at least 1 message per at least 1ms`}},
		{name: "priority header not a header name",
			edit: replace("    concurrency: 4", "    concurrency: 4\n    priorityHeader: \"Urgent: yes\""),
			want: []string{`priorityHeader: "Urgent: yes" is not a header name`}},
		{name: "version not SemVer",
			edit: replace("version: 1.0.0", "version: v1"),
			want: []string{`version: "v1" is not a SemVer version`}},
		{name: "undeclared stream",
			edit: replace("stream: TRANSCRIPTION", "stream: NOPE"),
			want: []string{`stream: "NOPE" is not declared`}},
		{name: "dead-letter stream missing",
			edit: replace(`subjects: ["deadletter.>"]`, `subjects: ["dl.>"]`),
			want: []string{"deadLetter: subject deadletter.summarize-session of function summarize-session is not stored by stream DEADLETTER"}},
		{name: "duplicate durables and every problem at once",
			edit: func(s string) string {
				return strings.Replace(s+`  - name: publish-recording-event
    version: 1.0
    stream: TRANSCRIPTION
    subject: transcription.x
    durable: summarize-session
    concurrency: 0
`, "heartbeat: 2s", "heartbeat: 7s", 1)
			},
			want: []string{
				`functions[1] (publish-recording-event).durable: "summarize-session" is also the durable of summarize-session`,
				`functions[1] (publish-recording-event).version: "1.0" is not a SemVer`,
				"functions[0] (summarize-session).heartbeat: 7s must be positive and at most half of ackWait 6s",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.edit(validManifest)))
			if err != nil {
				t.Fatal(err)
			}
			err = m.Validate(known)
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("err = %v, want ErrInvalidManifest", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func replace(old, new string) func(string) string {
	return func(s string) string { return strings.Replace(s, old, new, 1) }
}

func TestSubjectCovered(t *testing.T) {
	tests := []struct {
		subj, pattern string
		want          bool
	}{
		{"transcription.session-ended", "transcription.>", true},
		{"transcription", "transcription.>", false},
		{"recording.*", "recording.*", true},
		{"recording.*", "recording.>", true},
		{"recording.>", "recording.*", false},
		{"recording.started", "recording.*", true},
		{"recording.a.b", "recording.*", false},
		{"conversation.*.recording", "conversation.>", true},
		{"a.b", "a.c", false},
	}
	for _, tt := range tests {
		if got := SubjectCovered(tt.subj, tt.pattern); got != tt.want {
			t.Errorf("SubjectCovered(%q, %q) = %v, want %v", tt.subj, tt.pattern, got, tt.want)
		}
	}
}
