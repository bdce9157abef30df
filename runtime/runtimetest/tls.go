package runtimetest

import (
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
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TLSUser and TLSPassword are the only credentials StartTLSServer accepts.
const (
	TLSUser     = "jetfn"
	TLSPassword = "s3cret-pw"
)

// CA issues certificates for the TLS tests. File is its certificate, the
// NATS_CA a client trusts it with.
type CA struct {
	File string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a certificate authority named name, writing its certificate
// to dir.
func NewCA(t testing.TB, dir, name string) *CA {
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
	return &CA{File: file, cert: cert, key: key}
}

// Issue writes a certificate and key for name (valid for 127.0.0.1) until
// notAfter.
func (ca *CA) Issue(t testing.TB, dir, name string, notAfter time.Time, usage x509.ExtKeyUsage) (certFile, keyFile string) {
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

func writePEM(t testing.TB, path, kind string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// StartTLSServer starts a nats-server with JetStream that requires TLS with
// a client certificate ca verifies, and the user TLSUser with TLSPassword.
// It returns the client URL and stops the server when the test ends.
func StartTLSServer(t testing.TB, ca *CA, dir string) string {
	t.Helper()
	certFile, keyFile := ca.Issue(t, dir, "server", time.Now().Add(time.Hour), x509.ExtKeyUsageServerAuth)
	tlsCfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: certFile, KeyFile: keyFile, CaFile: ca.File, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, &server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "js"),
		NoSigs: true, NoLog: true, TLS: true, TLSVerify: true, TLSConfig: tlsCfg,
		Username: TLSUser, Password: TLSPassword,
	})
}
