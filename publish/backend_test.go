package publish_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/publish"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

func newBackend(t *testing.T, url string, log *slog.Logger) *publish.Backend {
	t.Helper()
	client, err := publish.Connect(url, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return publish.NewBackend(client)
}

// recordingServer starts NATS with the RECORDING stream.
func recordingServer(t *testing.T) (*server.Server, jetstream.Stream) {
	t.Helper()
	ns := runtimetest.StartNATS(t)
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	return ns, recordingStream(t, js)
}

// recordingStream creates RECORDING as the manifests declare it.
func recordingStream(t *testing.T, js jetstream.JetStream) jetstream.Stream {
	t.Helper()
	s, err := js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{
		Name: "RECORDING", Subjects: []string{"recording.>"}, Duplicates: 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stopped(ts int64) events.RecordingEvent {
	return events.RecordingEvent{TS: ts, Event: events.RecordingStopped, RecordingID: "rec-1", ConversationID: "conv-1",
		Extra: map[string]json.RawMessage{"durationMs": json.RawMessage(`4200`)}}
}

func TestBackendPublishesOnceWithMsgID(t *testing.T) {
	ns, s := recordingServer(t)
	b := newBackend(t, ns.ClientURL(), nil)
	ctx := context.Background()
	for range 2 { // a retry of the same call
		if err := b.RecordingEvent(ctx, stopped(1_760_000_000_000)); err != nil {
			t.Fatal(err)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1: the retry must be dropped", info.State.Msgs)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "recording.stopped" || m.Header.Get(jetstream.MsgIDHeader) != "rec-1:stopped:1760000000000" {
		t.Errorf("stored on %s with ID %q", m.Subject, m.Header.Get(jetstream.MsgIDHeader))
	}
	if err := validateAgainst(t, "recording-event.schema.json", m.Data); err != nil {
		t.Errorf("payload %s refused by the schema: %v", m.Data, err)
	}
	if !strings.Contains(string(m.Data), `"durationMs":4200`) {
		t.Errorf("payload %s lost the backend's own field", m.Data)
	}
}

// TestBackendRetryWithoutTS retries a call that left ts zero, a
// millisecond later: the retry must not become a second event. ts is part
// of the event's identity (its Nats-Msg-Id), so only the caller can keep it
// the same across retries; a zero ts is refused and nothing is published.
func TestBackendRetryWithoutTS(t *testing.T) {
	ns, s := recordingServer(t)
	b := newBackend(t, ns.ClientURL(), nil)
	var errs []error
	for range 2 { // a retry of the same call
		start := time.Now().UnixMilli()
		runtimetest.Eventually(t, time.Second, "the clock past a millisecond", func() bool { return time.Now().UnixMilli() > start })
		errs = append(errs, b.RecordingEvent(context.Background(), stopped(0)))
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("stream holds %d messages for one event and its retry, want 0 (ts zero refused)", info.State.Msgs)
	}
	for i, err := range errs {
		if !errors.Is(err, publish.ErrNoTS) {
			t.Errorf("call %d with ts 0: %v, want ErrNoTS", i+1, err)
		}
	}
}

func TestBackendWithoutNATS(t *testing.T) {
	b := newBackend(t, "", nil)
	if b.Enabled() {
		t.Fatal("a Backend without a URL says it publishes")
	}
	if err := b.RecordingEvent(context.Background(), stopped(1)); err != nil {
		t.Fatalf("no-op publish: %v", err)
	}
}

func TestBackendRefusesBadEvents(t *testing.T) {
	tests := []struct {
		name string
		ev   events.RecordingEvent
		want string
	}{
		{name: "unknown event", ev: events.RecordingEvent{TS: 1, Event: "failed", RecordingID: "r", ConversationID: "c"},
			want: `event: want one of "requested", `},
		{name: "deleted without reason", ev: events.RecordingEvent{TS: 1, Event: events.RecordingDeleted, RecordingID: "r", ConversationID: "c"},
			want: `reason: missing (required when event is "deleted")`},
		{name: "subject token in id", ev: events.RecordingEvent{TS: 1, Event: events.RecordingStarted, RecordingID: "a.b", ConversationID: "c"},
			want: `recordingId: must not contain '.' (got "a.b")`},
		{name: "ts zero", ev: events.RecordingEvent{Event: events.RecordingStarted, RecordingID: "r", ConversationID: "c"},
			want: "needs its ts"},
	}
	var logs runtimetest.LogBuffer
	b := newBackend(t, "", slog.New(slog.NewTextHandler(&logs, nil)))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.RecordingEvent(context.Background(), tt.ev)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one naming %q", err, tt.want)
			}
		})
	}
	if got := strings.Count(logs.String(), "refusing recording event"); got != len(tests) {
		t.Errorf("logged %d refusals, want %d", got, len(tests))
	}
}

// TestBackendNATSDown: with the server gone, a publish returns within the
// client's bounded timeout, logs and returns its error, and does not panic.
func TestBackendNATSDown(t *testing.T) {
	ns, _ := recordingServer(t)
	var logs runtimetest.LogBuffer
	b := newBackend(t, ns.ClientURL(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err := b.RecordingEvent(context.Background(), stopped(1)); err != nil {
		t.Fatalf("publish with NATS up: %v", err)
	}
	devstack.StopNATS(ns)
	start := time.Now()
	err := b.RecordingEvent(context.Background(), stopped(2))
	took := time.Since(start)
	t.Logf("publish with NATS down returned after %s: %v", took, err)
	if err == nil {
		t.Error("publish with NATS down returned nil")
	}
	if limit := publish.DefaultTimeout + time.Second; took > limit {
		t.Errorf("blocked the caller %s, want at most %s", took, limit)
	}
	if !strings.Contains(logs.String(), "publishing event") {
		t.Errorf("the failed publish was not logged:\n%s", logs.String())
	}
}
