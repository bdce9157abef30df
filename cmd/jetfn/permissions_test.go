package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/ops/status"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// twoGreeters runs the greeter twice on one instance, as greeter and
// welcomer: two micro services on one connection.
const twoGreeters = runtest.Manifest + `
  - name: welcomer
    version: 1.0.0
    stream: TEST
    subject: test.welcome
`

// TestStatusUnderGeneratedPermissions runs an instance of two functions as
// a user with exactly what `jetfn permissions` prints, and an operator whose
// user may only ask $SRV.STATS and read its inbox: `jetfn status` lists
// both functions, with the default inbox prefix and with one of the
// operator's own that the permissions name.
func TestStatusUnderGeneratedPermissions(t *testing.T) {
	tests := []struct {
		name      string
		permsArgs []string
		opsInbox  string // NATS_INBOX_PREFIX of the operator; "" is _INBOX
	}{
		{name: "default inbox prefix"},
		{name: "the operator's own inbox prefix", permsArgs: []string{"--reply-prefix", "_OPS"}, opsInbox: "_OPS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "manifest.yaml")
			if err := os.WriteFile(file, []byte(twoGreeters), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("JETFN_MANIFEST", "")
			var perms, errOut bytes.Buffer
			if code := realMain(context.Background(), append([]string{"permissions", "--manifest", file}, tt.permsArgs...), &perms, &errOut); code != 0 {
				t.Fatalf("jetfn permissions: exit %d: %s", code, errOut.String())
			}
			inbox := cmp.Or(tt.opsInbox, "_INBOX")
			opsPerms := fmt.Sprintf(`permissions: { publish: { allow: ["$SRV.STATS"] }, subscribe: { allow: [%q] } }`, inbox+".>")
			url := runtimetest.StartAccountsServer(t, perms.String(), runtimetest.WithUser("ops", opsPerms))
			startTwoGreeters(t, url)

			setEnv(t, map[string]string{"NATS_URL": url, "NATS_USER": "ops", "NATS_PASSWORD": "ops", "NATS_INBOX_PREFIX": tt.opsInbox})
			var out bytes.Buffer
			if code := realMain(context.Background(), []string{"status", "--json", "--wait", "500ms"}, &out, &out); code != 0 {
				t.Fatalf("status --json: exit %d: %s", code, out.String())
			}
			var instances []status.Instance
			if err := json.Unmarshal(out.Bytes(), &instances); err != nil {
				t.Fatalf("status --json = %s: %v", out.String(), err)
			}
			var names []string
			for _, in := range instances {
				names = append(names, in.Function)
			}
			if strings.Join(names, ",") != "greeter,welcomer" {
				t.Fatalf("jetfn status found %d of 2 functions %v, under the permissions\n%s", len(names), names, perms.String())
			}
		})
	}
}

// startTwoGreeters provisions twoGreeters as admin and runs it as the user
// jetfn until the test ends.
func startTwoGreeters(t *testing.T, url string) {
	t.Helper()
	m, err := manifest.Parse([]byte(twoGreeters))
	if err != nil {
		t.Fatal(err)
	}
	welcomer := runtest.Greeter
	welcomer.Name = "welcomer"
	fns := []jetfn.Function{runtest.Greeter, welcomer}
	admin := runtimetest.Connect(t, runtimetest.UserURL(url, "admin"))
	provisioner, err := runtime.New(admin, m, fns)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- provisioner.Run(ctx) }()
	select {
	case <-provisioner.Ready():
	case err := <-done:
		t.Fatalf("provisioning as admin: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("provisioning as admin: %v", err)
	}
	user, err := nats.Connect(runtimetest.UserURL(url, "jetfn"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(user.Close)
	rt, err := runtime.New(user, m, fns, runtime.WithoutProvisioning())
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
	if err := user.Flush(); err != nil { // the server knows every subscription
		t.Fatal(err)
	}
}

// TestPermissionsReplyPrefixes: the printed block names reply rights on the
// prefixes given, never allow_responses, and refuses a prefix that would
// reopen NATS's own subjects.
func TestPermissionsReplyPrefixes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{name: "the default inbox", wantCode: 0, want: `"_INBOX.>"] }`},
		{name: "two operator prefixes", args: []string{"--reply-prefix", "_OPS", "--reply-prefix", "_CONSOLE"},
			wantCode: 0, want: `"_OPS.>", "_CONSOLE.>"] }`},
		{name: "a prefix in $", args: []string{"--reply-prefix", "$JS.API"},
			wantCode: 2, want: `reply prefix "$JS.API": not a usable inbox prefix: is in NATS's own $ namespace`},
		{name: "a wildcard", args: []string{"--inbox-prefix", "_INBOX.*"},
			wantCode: 2, want: `inbox prefix "_INBOX.*": not a usable inbox prefix: holds a wildcard`},
	}
	t.Setenv("JETFN_MANIFEST", "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			args := append([]string{"permissions", "--manifest", "../../manifests/local.yaml"}, tt.args...)
			code := realMain(context.Background(), args, &out, &out)
			if code != tt.wantCode || !strings.Contains(out.String(), tt.want) || strings.Contains(out.String(), "allow_responses") {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q, no allow_responses", code, out.String(), tt.wantCode, tt.want)
			}
		})
	}
}
