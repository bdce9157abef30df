package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestSimulateSecured plays the publishers against a stack whose NATS
// server requires TLS with a client certificate and a user and password:
// `jetfn simulate` publishes through package publish, which must connect
// with the same NATS_* settings as every other command.
func TestSimulateSecured(t *testing.T) {
	dir := t.TempDir()
	ca := runtimetest.NewCA(t, dir, "ca")
	url := runtimetest.StartTLSServer(t, ca, dir)
	cert, key := ca.Issue(t, dir, "client", time.Now().Add(time.Hour), x509.ExtKeyUsageClientAuth)
	mongo, _ := runtimetest.StartMongo(t)
	setEnv(t, map[string]string{
		"NATS_URL": url, "MONGO_URI": mongo.URI, "JETFN_MANIFEST": "../../manifests/local.yaml",
		"NATS_CA": ca.File, "NATS_CERT": cert, "NATS_KEY": key,
		"NATS_USER": "jetfn", "NATS_PASSWORD": "s3cret-pw", "LOG_LEVEL": "info",
	})
	runInBackground(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "recording", args: []string{"simulate", "recording", "--timeout", "30s"}, want: "state deleted"},
		{name: "call", args: []string{"simulate", "call", "--segments", "2", "--late", "0", "--timeout", "30s"}, want: "2 of 2 segments, complete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := realMain(context.Background(), tt.args, &out, &out); code != 0 || !strings.Contains(out.String(), tt.want) {
				t.Fatalf("jetfn %s: exit %d, output:\n%s\nwant exit 0 and %q", strings.Join(tt.args, " "), code, out.String(), tt.want)
			}
		})
	}
}

// runInBackground runs `jetfn run` in-process until the test ends, and
// returns once it logs that it is ready.
func runInBackground(t *testing.T) {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- realMain(ctx, []string{"run"}, pw, pw)
		pw.Close()
	}()
	var mu sync.Mutex
	var all strings.Builder
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			all.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "runtime ready") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-code })
	select {
	case <-ready:
	case c := <-code:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("jetfn run exited %d before it was ready:\n%s", c, all.String())
	case <-time.After(60 * time.Second):
		t.Fatal("jetfn run not ready after 60s")
	}
}
