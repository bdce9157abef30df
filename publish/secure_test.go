package publish_test

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/natsconn"
	"github.com/jetfn/jetfn/publish"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestConnectSecured publishes to a server that requires TLS with a client
// certificate and a user and password: with the settings the commands take
// (NATS_CA, NATS_CERT/NATS_KEY, NATS_USER/NATS_PASSWORD) the event is
// stored; without them it is not; and settings that cannot work fail
// Connect, naming the variable.
func TestConnectSecured(t *testing.T) {
	dir := t.TempDir()
	ca := runtimetest.NewCA(t, dir, "ca")
	url := runtimetest.StartTLSServer(t, ca, dir)
	cert, key := ca.Issue(t, dir, "publisher", time.Now().Add(time.Hour), x509.ExtKeyUsageClientAuth)
	full := natsconn.Settings{CAFile: ca.File, CertFile: cert, KeyFile: key,
		User: runtimetest.TLSUser, Password: runtimetest.TLSPassword}
	admin, err := full.Options()
	if err != nil {
		t.Fatal(err)
	}
	s := recordingStream(t, connectJS(t, url, admin))
	tests := []struct {
		name       string
		opts       []publish.Option
		wantStored bool
		wantErr    string // of Connect
	}{
		{name: "the commands' settings", opts: []publish.Option{publish.WithSettings(full)}, wantStored: true},
		{name: "no settings"},
		{name: "half a user", opts: []publish.Option{publish.WithSettings(natsconn.Settings{User: "jetfn"})},
			wantErr: "NATS_USER and NATS_PASSWORD: set both or neither"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, err := publish.Connect(url, nil, tt.opts...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Connect = %v, want an error naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(client.Close)
			err = publish.NewBackend(client).RecordingEvent(context.Background(), stopped(int64(i+1)))
			if stored := err == nil; stored != tt.wantStored {
				t.Fatalf("publish: %v; want stored %t", err, tt.wantStored)
			}
		})
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("RECORDING holds %d events, want the one published with the settings", info.State.Msgs)
	}
}

func connectJS(t *testing.T, url string, opts []nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
