package runtimetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartAccountsServer starts a nats-server from a config file with one
// JetStream account holding an "admin" user (password admin) and a "jetfn"
// user (password jetfn) with the given permissions block, exactly as
// `jetfn permissions` prints it (runtime.Permissions.ServerConfig). It
// returns the client URL and stops the server when the test ends.
func StartAccountsServer(t testing.TB, jetfnPermissions string) string {
	t.Helper()
	dir := t.TempDir()
	conf := fmt.Sprintf(`listen: "127.0.0.1:-1"
jetstream { store_dir: %q }
accounts {
  APP {
    jetstream: enabled
    users: [
      { user: admin, password: admin }
      { user: jetfn, password: jetfn, %s }
    ]
  }
}
`, filepath.Join(dir, "js"), jetfnPermissions)
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("server config:\n%s\n%v", conf, err)
	}
	opts.NoSigs, opts.NoLog = true, true
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
