package simulate_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn"
	publishrecordingevent "github.com/jetfn/jetfn/functions/publish-recording-event"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/simulate"
)

const recordingManifest = `
streams:
  - name: RECORDING
    subjects: ["recording.>"]
  - name: NOTIFICATIONS
    subjects: ["conversation.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: publish-recording-event
    version: 1.0.0
    stream: RECORDING
    subject: recording.*
    concurrency: 4
    backoff: [200ms]
    outputs:
      - subject: conversation.*.recording
        stream: NOTIFICATIONS
`

// startRecordingStack starts embedded NATS and FerretDB and a runtime with
// publish-recording-event on them.
func startRecordingStack(t *testing.T) (string, *mongo.Database) {
	t.Helper()
	return startStack(t, recordingManifest, jetfn.Function{Name: publishrecordingevent.Name, New: publishrecordingevent.New})
}

func TestRecording(t *testing.T) {
	url, db := startRecordingStack(t)
	tests := []struct {
		name        string
		opts        func(*simulate.RecordingOptions)
		wantNotices int
		want        []string
	}{
		{name: "start stop delete", wantNotices: 7,
			want: []string{"published recording.stop-requested", "state deleted, failed false, 7 events", `reason "user-deleted"`}},
		{name: "never started", opts: func(o *simulate.RecordingOptions) { o.NeverStarted = true }, wantNotices: 2,
			want: []string{"state deleted, failed true, 2 events", `reason "never-started"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := simulate.DefaultRecordingOptions()
			opts.Timeout = time.Minute
			if tt.opts != nil {
				tt.opts(&opts)
			}
			var out bytes.Buffer
			if err := simulate.Recording(context.Background(), url, db, &out, opts); err != nil {
				t.Fatalf("Recording: %v\n%s", err, out.String())
			}
			t.Logf("\n%s", out.String())
			_, table, _ := strings.Cut(out.String(), "published the events:\n")
			table, _, _ = strings.Cut(table, "\nrecording ")
			rows := 0
			for _, line := range strings.Split(table, "\n") {
				if f := strings.Fields(line); len(f) > 0 && f[0] != "EVENT" && !strings.HasPrefix(f[0], "(") {
					rows++
				}
			}
			if rows != tt.wantNotices {
				t.Errorf("%d notice rows, want %d", rows, tt.wantNotices)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q", w)
				}
			}
		})
	}
}

// TestRecordingWithoutFunction: with the streams but no function running,
// Recording gives up at its timeout and says what it waited for.
func TestRecordingWithoutFunction(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	for name, subject := range map[string]string{"RECORDING": "recording.>", "NOTIFICATIONS": "conversation.>"} {
		if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	opts := simulate.DefaultRecordingOptions()
	opts.Timeout = 2 * time.Second
	err = simulate.Recording(context.Background(), ns.ClientURL(), nil, &bytes.Buffer{}, opts)
	if !errors.Is(err, simulate.ErrRecordingNotProcessed) || !strings.Contains(err.Error(), "0 of 7 notices") {
		t.Fatalf("without the function: %v, want ErrRecordingNotProcessed after 0 of 7 notices", err)
	}
	if err := simulate.Recording(context.Background(), "", nil, &bytes.Buffer{}, opts); !errors.Is(err, simulate.ErrNoNATS) {
		t.Fatalf("without a URL: %v, want ErrNoNATS", err)
	}
}
