package simulate_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/devstack"
	"github.com/jetfn/jetfn/events"
	summarizesession "github.com/jetfn/jetfn/functions/summarize-session"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/simulate"
)

const callManifest = `
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
    concurrency: 8
    backoff: [200ms]
    outputs:
      - subject: transcript.processed
        stream: TRANSCRIPTION
    config:
      quiet: 3s
`

// startCallStack starts embedded NATS and FerretDB and, when m is given, a
// runtime with summarize-session on them.
func startCallStack(t *testing.T, m string, opts ...runtime.Option) (string, *mongo.Database) {
	t.Helper()
	return startStack(t, m, jetfn.Function{Name: summarizesession.Name, New: summarizesession.New}, opts...)
}

// startStack starts embedded NATS and FerretDB and, when manifest is given,
// a runtime with fn on them. It returns the NATS URL and a database of the
// test's own. opts are the runtime's, beside its database.
func startStack(t *testing.T, manifestYAML string, fn jetfn.Function, opts ...runtime.Option) (string, *mongo.Database) {
	t.Helper()
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	_, client := runtimetest.StartMongo(t)
	db := client.Database(strings.ReplaceAll(t.Name(), "/", "_"))
	if manifestYAML == "" {
		return ns.ClientURL(), db
	}
	m, err := manifest.Parse([]byte(manifestYAML))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(nc, m, []jetfn.Function{fn}, append(opts, runtime.WithMongo(db))...)
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
	return ns.ClientURL(), db
}

func TestCall(t *testing.T) {
	url, db := startCallStack(t, callManifest)
	tests := []struct {
		name    string
		opts    func(*simulate.CallOptions)
		want    []string
		wantNot []string
	}{
		{name: "one call with late segments", opts: func(*simulate.CallOptions) {},
			want: []string{"12 of 12 segments, complete", "Dr. Okafor", "Longest turns:\n  1. Ana (from segment 3)", "  Dr. Okafor  27\n",
				"  - Morning everyone, can you all hear me?\n", "  - Who trains the nurses on the new app?\n"}},
		{name: "silent call", opts: func(o *simulate.CallOptions) { o.Segments, o.LateSegments = 0, 0 },
			want: []string{"0 of 0 segments, complete", "Words per speaker:\n  (none)", "Questions:\n  (none)"}},
		{name: "late segments after the quiet period are missed", opts: func(o *simulate.CallOptions) { o.LateDelay = 6 * time.Second },
			want: []string{"10 of 12 segments, INCOMPLETE"}},
		{name: "concurrent calls", opts: func(o *simulate.CallOptions) { o.Sessions, o.Timeout = 6, 3*time.Minute },
			want: []string{"6/6 completed in ", "(6 with every segment)"}, wantNot: []string{"Longest turns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := simulate.DefaultCallOptions()
			opts.LateDelay = 200 * time.Millisecond
			tt.opts(&opts)
			var out bytes.Buffer
			if err := simulate.Call(context.Background(), url, db, &out, opts); err != nil {
				t.Fatalf("Call: %v\n%s", err, out.String())
			}
			t.Logf("output:\n%s", out.String())
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(out.String(), w) {
					t.Errorf("output holds %q", w)
				}
			}
		})
	}
}

// TestCallRidesOutMongoOutage: Mongo is down when the call starts; the
// simulated transcriber retries its first segment until Mongo is back on
// the same address, and the call completes with every segment, once.
func TestCallRidesOutMongoOutage(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	dir := t.TempDir()
	down, err := devstack.StartMongo("127.0.0.1:0", dir)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: after every client has
	// disconnected, when FerretDB has no connection to wait for.
	mongoNow := down
	t.Cleanup(func() { mongoNow.Stop() })
	addr, err := url.Parse(down.URI)
	if err != nil {
		t.Fatal(err)
	}
	db := runtimetest.ConnectMongo(t, down.URI).Database(t.Name())
	m, err := manifest.Parse([]byte(callManifest))
	if err != nil {
		t.Fatal(err)
	}
	fn := jetfn.Function{Name: summarizesession.Name, New: summarizesession.New}
	rt, err := runtime.New(runtimetest.Connect(t, ns.ClientURL()), m, []jetfn.Function{fn}, runtime.WithMongo(db))
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
	down.Stop()

	// A short server selection makes each try fail fast while Mongo is down.
	client, err := mongo.Connect(options.Client().ApplyURI(down.URI).SetServerSelectionTimeout(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	var logs runtimetest.LogBuffer
	opts := simulate.DefaultCallOptions()
	opts.LateDelay = 200 * time.Millisecond
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- simulate.Call(t.Context(), ns.ClientURL(), client.Database(t.Name()), &out, opts)
	}()
	runtimetest.Eventually(t, 20*time.Second, "a retried segment save while Mongo is down", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Call returned while Mongo was down: %v", err)
		default:
		}
		return strings.Contains(logs.String(), "simulate: retrying")
	})
	back, err := devstack.StartMongo(addr.Host, dir)
	if err != nil {
		t.Fatal(err)
	}
	mongoNow = back
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Call after Mongo came back: %v\n%s", err, out.String())
		}
	case <-time.After(opts.Timeout):
		t.Fatal("Call did not return within its own timeout")
	}
	if !strings.Contains(out.String(), "12 of 12 segments, complete") {
		t.Errorf("output lacks the complete summary:\n%s", out.String())
	}
	if !strings.Contains(logs.String(), "step=\"segment sim-") {
		t.Errorf("the retry log does not name the segment:\n%s", logs.String())
	}
	js, err := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, msg := range runtimetest.StreamMessages(t, js, "TRANSCRIPTION") {
		stored[msg.Subject]++
	}
	want := map[string]int{events.SegmentSubject: 12, events.SessionEndedSubject: 1, events.TranscriptProcessedSubject: 1}
	if !maps.Equal(stored, want) {
		t.Errorf("stream holds %v, want %v", stored, want)
	}
}

// TestCallWithoutFunction: with nothing summarizing, Call gives up at its
// timeout with ErrCallNotProcessed and says how many completed. The
// sessions are silent, so the timeout is spent waiting, never saving: a
// save that a loaded machine slows past it would fail the call otherwise.
func TestCallWithoutFunction(t *testing.T) {
	url, db := startCallStack(t, "")
	js, err := jetstream.New(runtimetest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "TRANSCRIPTION", Subjects: []string{"transcription.>", "transcript.>"}}); err != nil {
		t.Fatal(err)
	}
	opts := simulate.DefaultCallOptions()
	opts.Sessions, opts.Segments, opts.LateSegments, opts.Timeout = 2, 0, 0, 2*time.Second
	var out bytes.Buffer
	err = simulate.Call(context.Background(), url, db, &out, opts)
	if !errors.Is(err, simulate.ErrCallNotProcessed) {
		t.Fatalf("Call = %v, want ErrCallNotProcessed", err)
	}
	if !strings.HasPrefix(out.String(), "0/2 completed in ") {
		t.Errorf("output %q, want 0/2 completed", out.String())
	}
}

func TestCallOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts simulate.CallOptions
		want string // "" means valid
	}{
		{name: "defaults", opts: simulate.DefaultCallOptions()},
		{name: "zero value", opts: simulate.CallOptions{}, want: "sessions: 0 is below 1\ntimeout: 0s is not positive"},
		{name: "too many late", opts: simulate.CallOptions{Sessions: 1, Segments: 2, LateSegments: 3, Timeout: time.Second},
			want: "late segments: 3 is not between 0 and segments (2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := tt.opts.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}
