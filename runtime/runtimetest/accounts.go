package runtimetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartAccountsServer starts a nats-server from a config file with one
// JetStream account holding an "admin" user (password admin) and a "jetfn"
// user (password jetfn) with the given permissions block, exactly as
// `jetfn permissions` prints it (runtime.Permissions.ServerConfig), plus
// what opts add. It returns the client URL and stops the server when the
// test ends.
func StartAccountsServer(t testing.TB, jetfnPermissions string, opts ...AccountsOption) string {
	t.Helper()
	cfg := accountsConfig{users: []string{"{ user: admin, password: admin }",
		fmt.Sprintf("{ user: jetfn, password: jetfn, %s }", jetfnPermissions)}}
	for _, o := range opts {
		o(&cfg)
	}
	dir := t.TempDir()
	conf := fmt.Sprintf(`listen: "127.0.0.1:-1"
jetstream { store_dir: %q%s }
accounts {
  APP {
    jetstream: enabled
    users: [
      %s
    ]
  }
}
`, filepath.Join(dir, "js"), cfg.jetstream, strings.Join(cfg.users, "\n      "))
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	sopts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("server config:\n%s\n%v", conf, err)
	}
	sopts.NoSigs, sopts.NoLog = true, true
	return startServer(t, sopts)
}

// startServer starts a server with opts for the rest of the test and
// returns its client URL.
func startServer(t testing.TB, opts *server.Options) string {
	t.Helper()
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns.ClientURL()
}

// AccountsOption changes the server StartAccountsServer starts.
type AccountsOption func(*accountsConfig)

type accountsConfig struct {
	jetstream string   // added to the jetstream block
	users     []string // entries of the account's users list
}

// WithUser adds a user to the account, its password its name, with a
// permissions block as nats-server's config takes it ("permissions: {...}").
func WithUser(name, permissions string) AccountsOption {
	return func(c *accountsConfig) {
		c.users = append(c.users, fmt.Sprintf("{ user: %q, password: %q, %s }", name, name, permissions))
	}
}

// NotStrict turns JetStream's strict API checking off (`jetstream { strict:
// false }`, the behaviour of servers before 2.11): the server then ignores
// the fields it does not know in an API request, so a body that was never
// meant for it (a micro PING's answer) passes as a valid request.
func NotStrict() AccountsOption {
	return func(c *accountsConfig) { c.jetstream += ", strict: false" }
}

// UserURL is url with a user's credentials in it; every user of
// StartAccountsServer has its name as password.
func UserURL(url, user string) string {
	return strings.Replace(url, "nats://", "nats://"+user+":"+user+"@", 1)
}

// LogBuffer is a log sink that the code under test may write to from any
// goroutine while the test reads it.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

var violationRe = regexp.MustCompile(`(?i)permissions violation for (?:publish|subscription) to \\?"([^"\\]+)\\?"`)

// Violations are the subjects of the permissions violations logged so far.
func (l *LogBuffer) Violations() []string {
	var out []string
	for _, m := range violationRe.FindAllStringSubmatch(l.String(), -1) {
		out = append(out, m[1])
	}
	return out
}
