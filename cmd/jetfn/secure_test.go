package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

func TestSecureConnections(t *testing.T) {
	dir := t.TempDir()
	ca, otherCA := runtimetest.NewCA(t, dir, "ca"), runtimetest.NewCA(t, dir, "other-ca")
	url := runtimetest.StartTLSServer(t, ca, dir)
	cert, key := ca.Issue(t, dir, "client", time.Now().Add(time.Hour), x509.ExtKeyUsageClientAuth)
	expiredCert, expiredKey := ca.Issue(t, dir, "expired", time.Now().Add(-time.Hour), x509.ExtKeyUsageClientAuth)
	mongo, _ := runtimetest.StartMongo(t)
	good := map[string]string{
		"NATS_URL": url, "MONGO_URI": mongo.URI, "JETFN_MANIFEST": "../../manifests/local.yaml",
		"NATS_CA": ca.File, "NATS_CERT": cert, "NATS_KEY": key,
		"NATS_USER": "jetfn", "NATS_PASSWORD": "s3cret-pw", "LOG_LEVEL": "info",
	}
	t.Run("connects and runs", func(t *testing.T) {
		setEnv(t, good)
		out := runUntilReady(t)
		if strings.Contains(out, "s3cret-pw") {
			t.Fatalf("the password reached the output:\n%s", out)
		}
	})
	failures := []struct {
		name   string
		change map[string]string
		want   string
	}{
		{name: "wrong CA", change: map[string]string{"NATS_CA": otherCA.File}, want: "certificate"},
		{name: "expired client certificate", change: map[string]string{"NATS_CERT": expiredCert, "NATS_KEY": expiredKey}, want: "connecting to NATS_URL"},
		{name: "bad password", change: map[string]string{"NATS_PASSWORD": "wrong-pw-123"}, want: "Authorization Violation"},
		{name: "Mongo password stays secret", change: map[string]string{"MONGO_URI": "mongodb://app:mongo-secret-77@127.0.0.1:1/"}, want: "MONGO_URI mongodb://app:xxxxx@127.0.0.1:1/"},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, good)
			setEnv(t, tt.change)
			var out bytes.Buffer
			code := realMain(context.Background(), []string{"run"}, &out, &out)
			text := strings.TrimSpace(out.String())
			t.Logf("exit %d: %s", code, text)
			if code != 2 || !strings.Contains(text, tt.want) || strings.Count(text, "\n") != 0 {
				t.Fatalf("exit %d, output %q; want exit 2 and one line containing %q", code, text, tt.want)
			}
			for _, secret := range []string{"s3cret-pw", "wrong-pw-123", "mongo-secret-77"} {
				if strings.Contains(text, secret) {
					t.Fatalf("secret %q in the output", secret)
				}
			}
		})
	}
}

func setEnv(t *testing.T, vars map[string]string) {
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

// runUntilReady runs `jetfn run` in-process until it logs that it is ready,
// then cancels it and returns everything it wrote.
func runUntilReady(t *testing.T) string {
	t.Helper()
	return runArgsUntilReady(t, "run")
}

func TestRedactURLs(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "one URL", in: "nats://u:secret@h1:4222", want: "nats://u:xxxxx@h1:4222"},
		{name: "every URL of a list", in: "nats://u:secret@h1:4222, nats://u:secret@h2:4222",
			want: "nats://u:xxxxx@h1:4222,nats://u:xxxxx@h2:4222"},
		{name: "no password", in: "nats://h1:4222", want: "nats://h1:4222"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redactURLs(tt.in); got != tt.want {
				t.Fatalf("redactURLs(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
