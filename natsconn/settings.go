package natsconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// Settings are how a client authenticates to NATS and secures the
// connection. The env tags are the variables every jetfn command reads
// (caarlos0/env fills the struct from them), and a service using package
// publish can read the same ones. Secret values (password, token, the
// contents of the credentials and seed files) are never logged, and errors
// name the variable, not its value.
type Settings struct {
	CredsFile   string `env:"NATS_CREDS"`     // JWT + nkey seed (.creds)
	NkeySeed    string `env:"NATS_NKEY_SEED"` // nkey seed file
	User        string `env:"NATS_USER"`
	Password    string `env:"NATS_PASSWORD"`
	Token       string `env:"NATS_TOKEN"`
	CAFile      string `env:"NATS_CA"`
	CertFile    string `env:"NATS_CERT"`
	KeyFile     string `env:"NATS_KEY"`
	TLSFirst    bool   `env:"NATS_TLS_HANDSHAKE_FIRST"`
	InboxPrefix string `env:"NATS_INBOX_PREFIX"`
}

// Validate reports every problem at once: two authentication methods, half
// a user/password or certificate/key pair, a file that cannot be read.
func (a Settings) Validate() error {
	var errs []error
	methods := 0
	for _, set := range []bool{a.CredsFile != "", a.NkeySeed != "", a.User != "", a.Token != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		errs = append(errs, errors.New("NATS_CREDS, NATS_NKEY_SEED, NATS_USER and NATS_TOKEN: set at most one"))
	}
	if (a.User == "") != (a.Password == "") {
		errs = append(errs, errors.New("NATS_USER and NATS_PASSWORD: set both or neither"))
	}
	if (a.CertFile == "") != (a.KeyFile == "") {
		errs = append(errs, errors.New("NATS_CERT and NATS_KEY: set both or neither"))
	}
	for name, path := range map[string]string{"NATS_CREDS": a.CredsFile, "NATS_NKEY_SEED": a.NkeySeed,
		"NATS_CA": a.CAFile, "NATS_CERT": a.CertFile, "NATS_KEY": a.KeyFile} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Options turns the settings into nats.go options.
func (a Settings) Options() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case a.CredsFile != "":
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	case a.NkeySeed != "":
		opt, err := nats.NkeyOptionFromSeed(a.NkeySeed)
		if err != nil {
			return nil, fmt.Errorf("NATS_NKEY_SEED: %w", err)
		}
		opts = append(opts, opt)
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	}
	if a.CAFile != "" || a.CertFile != "" {
		cfg, err := a.TLSConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(cfg))
	}
	if a.TLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	if a.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(a.InboxPrefix))
	}
	return opts, nil
}

// TLSConfig is TLS 1.2 or later, trusting NATS_CA (else the system's roots)
// and presenting NATS_CERT/NATS_KEY when set.
func (a Settings) TLSConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.CAFile != "" {
		pem, err := os.ReadFile(a.CAFile)
		if err != nil {
			return nil, fmt.Errorf("NATS_CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("NATS_CA: no PEM certificate in the file")
		}
	}
	if a.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("NATS_CERT/NATS_KEY: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
