package crash

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRowProblems(t *testing.T) {
	one := Result{Summaries: 1, Notifications: 1}
	tests := []struct {
		name string
		row  Row
		runs []Result
		want []string
	}{
		{name: "once each", row: Row{WantSummaries: 1, WantNotifications: 1}, runs: []Result{one, one}},
		{name: "a lost notification", row: Row{WantSummaries: 1, WantNotifications: 1},
			runs: []Result{one, {Summaries: 1}}, want: []string{"1 of 2 runs without exactly one notification"}},
		{name: "the control's second notification", row: Row{WantSummaries: 1, WantNotifications: 2},
			runs: []Result{{Summaries: 1, Notifications: 2}}},
		{name: "dead-lettered unhandled", row: Row{WantDeadLetters: 1}, runs: []Result{{DeadLetters: 1}}},
		{name: "a lost dead letter", row: Row{WantDeadLetters: 1},
			runs: []Result{{}}, want: []string{"1 of 1 runs without exactly one dead letter"}},
		{name: "an altered dead letter", row: Row{WantDeadLetters: 1},
			runs: []Result{{DeadLetters: 1, BadDeadLetter: []string{`header X-Trace "", want "abc"`}}},
			want: []string{`dead letter: header X-Trace "", want "abc"`}},
		{name: "a dead-lettered message that was handled too", row: Row{WantDeadLetters: 1},
			runs: []Result{{DeadLetters: 1, Summaries: 1, Notifications: 1}},
			want: []string{"want no summary, got up to 1 in a run", "want no notification, got up to 1 in a run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := tt.row
			for _, r := range tt.runs {
				row.add(r)
			}
			if got := row.Problems(); !slices.Equal(got, tt.want) {
				t.Errorf("Problems() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriteMarkdown(t *testing.T) {
	rep := Report{Rows: []Row{
		{Point: "after-notify", WantSummaries: 1, WantNotifications: 1, Runs: 2, OneSummary: 2, OneNotification: 2,
			MaxSummaries: 1, MaxNotifications: 1, Recoveries: []time.Duration{6 * time.Second, 6 * time.Second}},
		{Point: "careless-publisher", WantSummaries: 1, WantNotifications: 1, Runs: 3, OneSummary: 3, MaxSummaries: 1},
	}}
	var b strings.Builder
	rep.WriteMarkdown(&b)
	want := []string{
		"| after-notify | 2 | 2 | 2 | 1 | 1 | 6.0 / 6.0 s |",
		"| careless-publisher **FAIL** | 3 | 3 | 0 | 1 | 0 | – |",
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if got := lines[2:]; !slices.Equal(got, want) {
		t.Errorf("rows = %q, want %q", got, want)
	}
}

func TestExhaustionValidate(t *testing.T) {
	tests := []struct {
		name string
		e    Exhaustion
		want []string
	}{
		{name: "the suite's", e: DefaultExhaustion(1)},
		{name: "heartbeat too slow and quiet too short",
			e:    Exhaustion{AckWait: 2 * time.Second, Heartbeat: 1500 * time.Millisecond, MaxDeliver: []int{0}, Quiet: time.Second},
			want: []string{"maxDeliver 0 is below 1", "heartbeat 1.5s is not within ackWait/2 (1s)", "quiet 1s is not longer than ackWait 2s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			if err := tt.e.Validate(); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBackoffFitsMaxDeliver(t *testing.T) {
	tests := []struct {
		maxDeliver int
		want       string
	}{
		{maxDeliver: 1, want: "1s"},
		{maxDeliver: 3, want: "1s, 5s, 15s"},
		{maxDeliver: 5, want: "1s, 5s, 15s, 30s"},
	}
	for _, tt := range tests {
		if got := (consumerSettings{maxDeliver: tt.maxDeliver}).backoff(); got != tt.want {
			t.Errorf("backoff with maxDeliver %d = %q, want %q", tt.maxDeliver, got, tt.want)
		}
	}
}
