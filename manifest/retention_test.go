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
