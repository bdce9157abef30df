package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jetfn/jetfn"
)

// TestParseListsEveryDecodingProblem: one Parse reports every unknown key,
// repeated key and value of the wrong kind with its line, in manifest words.
func TestParseListsEveryDecodingProblem(t *testing.T) {
	tests := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{name: "a typo names the key meant",
			edit: replace("    maxDeliver: 5", "    maxDelivery: 5"),
			want: []string{"line 13: functions[0] (summarize-session).maxDelivery: unknown key; did you mean maxDeliver?"}},
		{name: "another spelling of a key names it",
			edit: replace("    maxDeliver: 5", "    max_deliver: 5"),
			want: []string{"line 13: functions[0] (summarize-session).max_deliver: unknown key; did you mean maxDeliver?"}},
		{name: "a key far from every other lists them",
			edit: replace("    subjects: [\"deadletter.>\"]", "    subjects: [\"deadletter.>\"]\n    colour: red"),
			want: []string{"line 7: streams[1] (DEADLETTER).colour: unknown key; the keys here are duplicates, maxAge, maxBytes, maxMsgs, name, replicas, retention, storage, subjects"}},
		{name: "a bare number for a duration needs a unit",
			edit: replace("ackWait: 6s", "ackWait: 6"),
			want: []string{"line 12: functions[0] (summarize-session).ackWait: 6 has no unit; durations need a unit: 6s"}},
		{name: "a duration in a list",
			edit: replace("backoff: [1s, 5s]", "backoff: [1s, soon]"),
			want: []string{"line 15: functions[0] (summarize-session).backoff[1]: soon is not a duration such as 500ms, 6s, 2m or 24h"}},
		{name: "a word for a number",
			edit: replace("concurrency: 4", "concurrency: four"),
			want: []string{"line 16: functions[0] (summarize-session).concurrency: four is not a whole number"}},
		{name: "a list for a single value",
			edit: replace("stream: TRANSCRIPTION", "stream: [TRANSCRIPTION]"),
			want: []string{"line 10: functions[0] (summarize-session).stream: want a single value, not a list"}},
		{name: "a key set twice",
			edit: replace("    concurrency: 4", "    concurrency: 4\n    concurrency: 2"),
			want: []string{"line 17: functions[0] (summarize-session).concurrency: also set at line 16"}},
		{name: "every problem at once",
			edit: func(s string) string {
				return replace("ackWait: 6s", "ackWait: 6")(replace("    concurrency: 4", "    concurency: 4")(s))
			},
			want: []string{
				"line 12: functions[0] (summarize-session).ackWait: 6 has no unit; durations need a unit: 6s",
				"line 16: functions[0] (summarize-session).concurency: unknown key; did you mean concurrency?",
			}},
		{name: "a bad indent is reported at its own line",
			edit: replace("    subjects: [\"transcription.>\", \"transcript.>\"]", "    subjects: [\"transcription.>\", \"transcript.>\"]\n   duplicates: 24h"),
			want: []string{"line 5: not valid YAML: did not find expected '-' indicator (check this line's indentation against the lines above)"}},
		{name: "a tab is reported at its own line",
			edit: replace("    maxDeliver: 5", "\tmaxDeliver: 5"),
			want: []string{"line 13: not valid YAML: found a tab character that violates indentation (YAML indents with spaces only)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := tt.edit(validManifest)
			if text == validManifest {
				t.Fatal("the edit did not apply")
			}
			_, err := Parse([]byte(text))
			if err == nil {
				t.Fatal("Parse accepted the manifest")
			}
			got := strings.Split(err.Error(), "\n")[1:] // after "invalid manifest:"
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for _, goName := range []string{"time.Duration", "manifest.", "Spec", "!!"} {
				if strings.Contains(err.Error(), goName) {
					t.Errorf("a problem names the Go type %q:\n%v", goName, err)
				}
			}
		})
	}
}

// TestInspectEveryStage: a key typo, a rule broken, a config typo, a config
// value of the wrong kind (in words, not Go types) and a short duplicate
// window come out of one Inspect, in line order, each with the file and its
// line.
func TestInspectEveryStage(t *testing.T) {
	text := replace("    concurrency: 4", "    concurency: 4")(
		replace("version: 1.0.0", "version: v1")(
			replace("      quiet: 2s", "      quiett: 2s\n      maxRounds: many")(
				replace(`subjects: ["transcription.>", "transcript.>"]`, `subjects: ["transcription.>", "transcript.>"]`+"\n    duplicates: 1m")(
					validManifest + "    outputs: [{subject: transcript.processed, stream: TRANSCRIPTION}]\n"))))
	fns := []jetfn.Function{checkedFunction("summarize-session")}
	m, report := Inspect("app.yaml", []byte(text), fns)
	if m == nil {
		t.Fatal("Inspect returned no manifest")
	}
	var got []string
	for _, p := range report.Problems {
		got = append(got, p.Error())
	}
	want := []string{
		"app.yaml:10: functions[0] (summarize-session).version: \"v1\" is not a SemVer version such as 1.0.0",
		"app.yaml:17: functions[0] (summarize-session).concurency: unknown key; did you mean concurrency?",
		"app.yaml:19: functions[0] (summarize-session).config.quiett: unknown key; the keys here are maxRounds, retry",
		"app.yaml:20: functions[0] (summarize-session).config.maxRounds: many is not a whole number",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if len(report.ShortWindows) != 1 || !strings.HasPrefix(report.ShortWindows[0].Error(),
		"app.yaml:5: streams[0] (TRANSCRIPTION).duplicates: duplicate window shorter than the redelivery horizon") {
		t.Errorf("short windows %v, want the 1m window at line 5", report.ShortWindows)
	}
}

// TestInspectNotYAML: text that is not YAML is the one problem there is.
func TestInspectNotYAML(t *testing.T) {
	m, report := Inspect("app.yaml", []byte("streams: [a, b\nfunctions: []\n"), nil)
	if m != nil || len(report.Problems) != 1 || !strings.HasPrefix(report.Problems[0].Error(), "app.yaml:") {
		t.Fatalf("manifest %v, problems %v; want none and one located problem", m, report.Problems)
	}
}
