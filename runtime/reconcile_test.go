package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/manifest"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStreamUpdateKeepsMessages reproduces the field report's release step:
// widening the duplicate window of a stream that holds messages keeps every
// message and the duplicate memory.
func TestStreamUpdateKeepsMessages(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	spec := manifest.StreamSpec{Name: "TEST", Subjects: []string{"test.>"}, Duplicates: 2 * time.Minute, Storage: "file", Replicas: 1}
	if err := ensureStream(ctx, env.js, spec); err != nil {
		t.Fatal(err)
	}
	for i := range 73 {
		if _, err := env.js.Publish(ctx, "test.in", []byte("x"), jetstream.WithMsgID(string(rune('a'+i%26))+string(rune('0'+i/26)))); err != nil {
			t.Fatal(err)
		}
	}
	spec.Duplicates = 24 * time.Hour
	spec.Subjects = append(spec.Subjects, "more.>")
	for range 2 { // twice: the update is idempotent
		if err := ensureStream(ctx, env.js, spec); err != nil {
			t.Fatal(err)
		}
	}
	if got := env.streamMsgs("TEST"); got != 73 {
		t.Fatalf("stream holds %d messages after the update, want 73", got)
	}
	ack, err := env.js.Publish(ctx, "test.in", []byte("x"), jetstream.WithMsgID("a0"))
	if err != nil || !ack.Duplicate {
		t.Fatalf("republish of a remembered ID: ack %+v err %v, want a duplicate", ack, err)
	}
	s, _ := env.js.Stream(ctx, "TEST")
	if got := s.CachedInfo().Config.Duplicates; got != 24*time.Hour {
		t.Fatalf("duplicate window %s, want 24h", got)
	}
}

func TestStreamChangesTheServerRefuses(t *testing.T) {
	tests := []struct {
		name      string
		change    func(*manifest.StreamSpec)
		wantField string
	}{
		{name: "storage type", change: func(s *manifest.StreamSpec) { s.Storage = "memory" }, wantField: "storage (File → Memory)"},
		{name: "shorter max age", change: func(s *manifest.StreamSpec) { s.MaxAge = time.Hour }, wantField: "maxAge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t)
			ctx := context.Background()
			spec := manifest.StreamSpec{Name: "TEST", Subjects: []string{"test.>"}, Duplicates: time.Minute, Storage: "file", Replicas: 1}
			if err := ensureStream(ctx, env.js, spec); err != nil {
				t.Fatal(err)
			}
			tt.change(&spec)
			err := ensureStream(ctx, env.js, spec)
			if !errors.Is(err, ErrServerRefused) || !strings.Contains(err.Error(), tt.wantField) {
				t.Fatalf("err = %v, want ErrServerRefused naming %q", err, tt.wantField)
			}
			t.Logf("%v", err)
		})
	}
}

func TestConsumerMatchesManifest(t *testing.T) {
	env := newEnv(t)
	env.start(testManifest(t, "    ackWait: 6s\n    maxDeliver: 4\n    concurrency: 3\n    maxAckPending: 50\n"+
		"    monitor: {ackPendingCritical: 40, lastAckCritical: 15m}\n"), &recorder{})
	cfg := env.consumerInfo("TEST", "fn").Config
	if cfg.AckWait != 6*time.Second || cfg.MaxDeliver != -1 || cfg.MaxAckPending != 50 ||
		cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.FilterSubject != "test.in" || cfg.Durable != "fn" {
		t.Fatalf("consumer config %+v does not match the manifest", cfg)
	}
	for k, want := range map[string]string{"io.nats.monitor.enabled": "true", "io.nats.monitor.outstanding-ack-critical": "40",
		"io.nats.monitor.last-ack-critical": "15m0s", "jetfn.function": "fn", "jetfn.max_deliver": "4"} {
		if got := cfg.Metadata[k]; got != want {
			t.Errorf("consumer metadata %s = %q, want %q", k, got, want)
		}
	}
	if _, set := cfg.Metadata["io.nats.monitor.unprocessed-critical"]; set {
		t.Error("a zero threshold was set")
	}
}
