package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+".pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

// issue writes a certificate and key for name, valid until notAfter.
func (ca *testCA) issue(t *testing.T, dir, name string, notAfter time.Time, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startTLSServer starts a nats-server that requires TLS with verified client
// certificates and a user/password.
func startTLSServer(t *testing.T, ca *testCA, dir string) string {
	t.Helper()
	certFile, keyFile := ca.issue(t, dir, "server", time.Now().Add(time.Hour), x509.ExtKeyUsageServerAuth)
	tlsCfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: certFile, KeyFile: keyFile, CaFile: ca.file, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "js"),
		NoSigs: true, NoLog: true, TLS: true, TLSVerify: true, TLSConfig: tlsCfg,
		Username: "jetfn", Password: "s3cret-pw",
	})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("TLS server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns.ClientURL()
}

func TestSecureConnections(t *testing.T) {
	dir := t.TempDir()
	ca, otherCA := newCA(t, dir, "ca"), newCA(t, dir, "other-ca")
	url := startTLSServer(t, ca, dir)
	cert, key := ca.issue(t, dir, "client", time.Now().Add(time.Hour), x509.ExtKeyUsageClientAuth)
	expiredCert, expiredKey := ca.issue(t, dir, "expired", time.Now().Add(-time.Hour), x509.ExtKeyUsageClientAuth)
	mongo, _ := runtimetest.StartMongo(t)
	good := map[string]string{
		"NATS_URL": url, "MONGO_URI": mongo.URI, "JETFN_MANIFEST": "../../manifests/local.yaml",
		"NATS_CA": ca.file, "NATS_CERT": cert, "NATS_KEY": key,
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
		{name: "wrong CA", change: map[string]string{"NATS_CA": otherCA.file}, want: "certificate"},
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
