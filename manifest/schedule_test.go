package manifest

import (
	"strings"
	"testing"
)

// scheduledManifest is validManifest with schedule lines on its function.
func scheduledManifest(lines string) string {
	return strings.Replace(validManifest, "    concurrency: 4", "    concurrency: 4\n"+lines, 1)
}

// TestScheduleValidation: every mistake in a schedule is named at the
// schedule's line; the stream must keep the schedule message beside the
// ticks.
func TestScheduleValidation(t *testing.T) {
	tests := []struct{ name, lines, want string }{
		{"neither", "    schedule: {missed: once}", "line 17: functions[0] (summarize-session).schedule: give cron"},
		{"both", "    schedule: {cron: \"* * * * *\", every: 1m}", "give cron (such as \"*/5 * * * *\") or every"},
		{"every below a second", "    schedule: {every: 500ms}", "every: 500ms must be whole seconds, at least 1s"},
		{"a zone for every", "    schedule: {every: 1m, timeZone: UTC}", "timeZone applies to cron only"},
		{"four fields", "    schedule: {cron: \"* * * *\"}", "4 fields: want 5"},
		{"an hour past 23", "    schedule: {cron: \"0 24 * * *\"}", `hour field "24": 24 is not from 0 to 23`},
		{"a bad step", "    schedule: {cron: \"*/0 * * * *\"}", `step "0" is not a whole number of at least 1`},
		{"a backwards range", "    schedule: {cron: \"0 9-5 * * *\"}", "range 9-5 runs backwards"},
		{"no such day", "    schedule: {cron: \"0 9 * * funday\"}", `"funday" is not a number from 0 to 6 or a name such as sun`},
		{"no such zone", "    schedule: {cron: \"@daily\", timeZone: Mars/Olympus}", `timeZone "Mars/Olympus" is not an IANA time zone`},
		{"a missed policy unknown", "    schedule: {every: 1m, missed: later}", `missed: "later": want once`},
		{"a date that never comes", "    schedule: {cron: \"0 0 30 2 *\"}", "no month given has a day 30"},
		{"days no month given has", "    schedule: {cron: \"0 0 31 4,6 *\"}", "no month given has a day 31"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(scheduledManifest(tt.lines)))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(known); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	narrow := strings.Replace(scheduledManifest("    schedule: {every: 1m}"), `["transcription.>", "transcript.>"]`, `["transcription.session-ended"]`, 1)
	m, err := Parse([]byte(narrow))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(known); err == nil || !strings.Contains(err.Error(), "stream TRANSCRIPTION must also store transcription.session-ended.jetfn-schedule") {
		t.Fatalf("err = %v, want the schedule subject asked for", err)
	}
}

// TestScheduleTwiceOnASubject: two functions cannot schedule one subject.
func TestScheduleTwiceOnASubject(t *testing.T) {
	doc := scheduledManifest("    schedule: {every: 1m}") + `  - name: publish-recording-event
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.session-ended
    schedule: {every: 2m}
`
	m, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := "functions[1] (publish-recording-event).schedule: another function schedules transcription.session-ended on stream TRANSCRIPTION"
	if err := m.Validate(known); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// TestSchedulePatterns: five cron fields gain the server's seconds, names
// and steps pass, and the function's stream allows schedules.
func TestSchedulePatterns(t *testing.T) {
	for lines, want := range map[string]string{
		`    schedule: {cron: "*/5 * * * *"}`:                        "0 */5 * * * *",
		`    schedule: {cron: "30 0 9 * jan-mar mon,fri"}`:           "30 0 9 * jan-mar mon,fri",
		`    schedule: {cron: "@daily", timeZone: America/New_York}`: "@daily",
		"    schedule: {every: 90s}":                                 "@every 1m30s",
		`    schedule: {cron: "0 0 29 2 *"}`:                         "0 0 0 29 2 *",
		`    schedule: {cron: "0 0 30 2 mon"}`:                       "0 0 0 30 2 mon",
		`    schedule: {cron: "0 1,,2 * * *"}`:                       "0 0 1,,2 * * *",
	} {
		m, err := Parse([]byte(scheduledManifest(lines)))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(known); err != nil {
			t.Fatalf("%s: %v", lines, err)
		}
		f := m.Functions[0]
		if got := f.Schedule.Pattern(); got != want || f.Schedule.Missed != MissedOnce || !m.Streams[0].AllowSchedules {
			t.Errorf("%s: pattern %q, missed %q, stream allows schedules %v; want %q, once, true", lines, got, f.Schedule.Missed, m.Streams[0].AllowSchedules, want)
		}
	}
}
