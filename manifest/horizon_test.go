package manifest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
)

// fieldReport is the field report's setup: a 2-minute window, ackWait 6s,
// maxDeliver 5 and a 130s processor outage; each run may take 2s.
func fieldReport(window string) string {
	return `
streams:
  - name: TRANSCRIPTION
    subjects: ["transcription.>", "transcript.>"]
    duplicates: ` + window + `
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: summarize-session
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.session-ended
    ackWait: 6s
    maxDeliver: 5
    maxOutage: 130s
    timeout: 2s
    outputs:
      - subject: transcript.processed
        stream: TRANSCRIPTION
`
}

func TestDuplicateWindowCheck(t *testing.T) {
	tests := []struct {
		name    string
		window  string
		wantErr bool
	}{
		{name: "field report's 2-minute window is refused", window: "2m", wantErr: true},
		{name: "one second short of twice the horizon is refused", window: "5m39s", wantErr: true},
		{name: "twice the horizon passes", window: "5m40s"},
		{name: "24h passes", window: "24h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(fieldReport(tt.window)))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(known); err != nil {
				t.Fatal(err)
			}
			err = m.CheckDuplicateWindows()
			if got := errors.Is(err, ErrShortWindow); got != tt.wantErr {
				t.Fatalf("short window = %v, want %v (err %v)", got, tt.wantErr, err)
			}
			if !tt.wantErr {
				return
			}
			t.Log(err)
			// The explanation names the stream, the window, the function,
			// the horizon's parts, the failure and the smallest fix.
			for _, want := range []string{"stream TRANSCRIPTION keeps message IDs for 2m0s", "function summarize-session",
				"2m50s", "maxOutage 2m10s", "5 deliveries waiting up to 30s", "5 × timeout 2s", "stores a second message",
				"at least 5m40s"} {
				if tt.window == "2m" && !strings.Contains(err.Error(), want) {
					t.Errorf("explanation lacks %q", want)
				}
			}
		})
	}
}

// TestHorizonCountsBackoff: every delivery's wait before the next is the
// longest of ackWait, its backoff entry and the Retry-After bound, since a
// handler's RetryAfter or a remote's Retry-After may ask for the bound on
// any delivery.
func TestHorizonCountsBackoff(t *testing.T) {
	growing := []time.Duration{time.Second, 20 * time.Second}
	tests := []struct {
		name string
		f    FunctionSpec
		want time.Duration
	}{
		// Waits: the bound defaults to the largest entry, 20s, so the first
		// delivery may wait 20s too: 4 × 20s.
		{name: "growing backoff: every delivery may wait the largest entry",
			f: FunctionSpec{AckWait: 6 * time.Second, MaxDeliver: 4, Backoff: growing}, want: 80 * time.Second},
		{name: "no backoff: ackWait bounds Retry-After",
			f: FunctionSpec{AckWait: 6 * time.Second, MaxDeliver: 5}, want: 30 * time.Second},
		{name: "maxRetryAfter above the backoff counts for every delivery",
			f:    FunctionSpec{AckWait: 6 * time.Second, MaxDeliver: 4, Backoff: growing, MaxRetryAfter: time.Hour},
			want: 4 * time.Hour},
		{name: "maxRetryAfter below ackWait: ackWait still counts",
			f:    FunctionSpec{AckWait: 6 * time.Second, MaxDeliver: 2, MaxRetryAfter: time.Second},
			want: 12 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.redeliveryWait(); got != tt.want {
				t.Fatalf("redeliveryWait = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestCheckCountsMaxRetryAfter: check refuses a window that a remote's
// largest allowed Retry-After on every delivery would outlive, and names
// the bound in its explanation.
func TestCheckCountsMaxRetryAfter(t *testing.T) {
	tests := []struct {
		name, maxRetryAfter string
		wantShort           bool
	}{
		// Horizon without it: 130s + 5 × 6s + 5 × 2s = 170s; window 5m40s.
		{name: "the default bound passes the field report's window", wantShort: false},
		{name: "a 10m bound on 5 deliveries outlives it", maxRetryAfter: "10m", wantShort: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := fieldReport("5m40s")
			if tt.maxRetryAfter != "" {
				doc = strings.Replace(doc, "    timeout: 2s\n", "    timeout: 2s\n    maxRetryAfter: "+tt.maxRetryAfter+"\n", 1)
			}
			m, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(known); err != nil {
				t.Fatal(err)
			}
			err = m.CheckDuplicateWindows()
			if got := errors.Is(err, ErrShortWindow); got != tt.wantShort {
				t.Fatalf("short window = %v, want %v (err %v)", got, tt.wantShort, err)
			}
			if tt.wantShort && !strings.Contains(err.Error(), "Retry-After up to maxRetryAfter 10m0s") {
				t.Errorf("explanation %q does not name the bound", err)
			}
		})
	}
}

func TestOutputChecks(t *testing.T) {
	tests := []struct {
		name string
		edit func(string) string
		want string
	}{
		{name: "output feeds its own input",
			edit: replace("subject: transcript.processed", "subject: transcription.>"),
			want: "overlaps the function's own input transcription.session-ended"},
		{name: "output no stream stores",
			edit: replace("subject: transcript.processed", "subject: summaries.done"),
			want: "subject summaries.done is not stored by stream TRANSCRIPTION"},
		{name: "output stream undeclared",
			edit: replace("        stream: TRANSCRIPTION", "        stream: NOTIFICATIONS"),
			want: `outputs[0].stream: "NOTIFICATIONS" is not declared`},
		{name: "streams overlap",
			edit: replace(`subjects: ["deadletter.>"]`, `subjects: ["deadletter.>", "transcript.*"]`),
			want: "subjects transcript.> and transcript.* overlap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.edit(fieldReport("24h"))))
			if err != nil {
				t.Fatal(err)
			}
			err = m.Validate(known)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestAllowShortWindowKey: the manifest's allowShortWindow accepts the
// field report's 2-minute window for every instance that runs it, and
// check reports it as a warning.
func TestAllowShortWindowKey(t *testing.T) {
	raw := []byte("allowShortWindow: true\n" + fieldReport("2m"))
	m, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckDuplicateWindows(); err != nil {
		t.Fatalf("CheckDuplicateWindows = %v, want the window accepted", err)
	}
	_, report := Inspect("", raw, []jetfn.Function{{Name: "summarize-session"}})
	if len(report.ShortWindows) != 0 || len(report.Warnings) != 1 || !strings.Contains(report.Warnings[0], "accepted by allowShortWindow") {
		t.Fatalf("report %+v, want the short window as one warning", report)
	}
}
