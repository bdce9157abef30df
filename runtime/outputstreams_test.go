package runtime

import (
	"strings"
	"testing"

	"github.com/jetfn/jetfn/manifest"
)

// TestOutputStreamsKeepMessageIDs: an output stream that can forget a
// message ID inside its duplicate window is refused (retention) or warned
// about (limits that discard). Before the fix the manifest had no such
// keys, so neither could be declared or checked.
func TestOutputStreamsKeepMessageIDs(t *testing.T) {
	tests := []struct {
		name        string
		outStream   string
		wantErr     string
		wantWarning string
	}{
		{name: "limits retention, unlimited", outStream: "{name: OUT, subjects: [out.>]}"},
		{name: "workqueue", outStream: "{name: OUT, subjects: [out.>], retention: workqueue}", wantErr: "Output streams need retention limits"},
		{name: "interest", outStream: "{name: OUT, subjects: [out.>], retention: interest}", wantErr: "has retention interest"},
		{name: "unknown retention", outStream: "{name: OUT, subjects: [out.>], retention: forever}", wantErr: `"forever" is not limits`},
		{name: "maxAge below window", outStream: "{name: OUT, subjects: [out.>], maxAge: 1h}", wantErr: "longer than maxAge 1h0m0s"},
		{name: "maxMsgs", outStream: "{name: OUT, subjects: [out.>], maxMsgs: 1000}", wantWarning: "maxMsgs 1000 / maxBytes 0 discard"},
		{name: "maxBytes", outStream: "{name: OUT, subjects: [out.>], maxBytes: 1048576}", wantWarning: "maxBytes 1048576 discard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := manifest.Parse([]byte(`
streams:
  - {name: TEST, subjects: [test.>]}
  - {name: DEADLETTER, subjects: [deadletter.>]}
  - ` + tt.outStream + `
functions:
  - {name: fn, version: 1.0.0, stream: TEST, subject: test.in, outputs: [{subject: out.x, stream: OUT}]}
`))
			if err != nil {
				t.Fatal(err)
			}
			err = m.Validate([]string{"fn"})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
			warnings := strings.Join(m.OutputStreamWarnings(), "\n")
			if tt.wantWarning == "" && warnings != "" || !strings.Contains(warnings, tt.wantWarning) {
				t.Fatalf("warnings %q, want %q", warnings, tt.wantWarning)
			}
		})
	}
}
