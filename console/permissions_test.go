package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/console"
	"github.com/jetfn/jetfn/deploy"
	"github.com/jetfn/jetfn/internal/runtest"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestConsolePermissions runs the console as a NATS user with exactly what
// `jetfn permissions --console [--actions]` generates and walks every page
// and action: the full set does it all without a permissions violation; the
// read-only set shows every page and cannot roll back.
func TestConsolePermissions(t *testing.T) {
	m, err := manifest.Parse([]byte(runtest.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("with actions", func(t *testing.T) {
		c := startPermissionCase(t, console.Permissions(m, console.PermissionOptions{Deployment: "default", Actions: true}))
		c.readEverything(t)
		job := c.act(t, "replay", url.Values{"seq": {"1"}}, http.StatusSeeOther)
		runtimetest.Eventually(t, 20*time.Second, "the replay done", func() bool {
			return strings.Contains(c.get(t, job), "1 replayed")
		})
		c.act(t, "rollback", nil, http.StatusSeeOther)
		if rev, err := deploy.Load(context.Background(), c.admin, "default"); err != nil || rev.Number != 3 {
			t.Errorf("after the rollback the deployment is at %d (%v), want 3", rev.Number, err)
		}
		if v := c.violations.Violations(); len(v) > 0 {
			t.Fatalf("permission violations with the generated permissions: %v", v)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		c := startPermissionCase(t, console.Permissions(m, console.PermissionOptions{Deployment: "default"}))
		c.readEverything(t)
		if v := c.violations.Violations(); len(v) > 0 {
			t.Fatalf("reading needed more than the read-only permissions: %v", v)
		}
		c.act(t, "rollback", nil, http.StatusBadGateway)
		runtimetest.Eventually(t, 10*time.Second, "the rollback refused by the server", func() bool {
			return slices.ContainsFunc(c.violations.Violations(), func(v string) bool {
				return strings.Contains(v, manifest.ManifestBucket) // the record's read comes before the put
			})
		})
		if rev, err := deploy.Load(context.Background(), c.admin, "default"); err != nil || rev.Number != 2 {
			t.Errorf("a read-only console changed the deployment: revision %d (%v)", rev.Number, err)
		}
	})
}

// permissionCase is a server with a greeter run by the admin, a dead
// letter, two revisions of deployment "default", and the console as the
// restricted user.
type permissionCase struct {
	base       string
	admin      jetstream.JetStream
	violations *runtimetest.LogBuffer
}

const permToken = "permission-test-token-0123456789"

func startPermissionCase(t *testing.T, perms manifest.Permissions) *permissionCase {
	t.Helper()
	url := runtimetest.StartAccountsServer(t, perms.ServerConfig())
	adminNC, err := nats.Connect(url, nats.UserInfo("admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adminNC.Close)
	admin, _ := jetstream.New(adminNC)
	ctx := context.Background()
	for _, raw := range []string{runtest.Manifest, strings.Replace(runtest.Manifest, "concurrency: 2", "concurrency: 3", 1)} {
		if _, err := deploy.Store(ctx, admin, "default", []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	rt := runtest.Start(t, adminNC, runtest.Manifest)
	runtest.Publish(t, adminNC, "test.in", `{"name":"a"}`, "a")
	runtest.Publish(t, adminNC, "test.in", `{"name":"poison"}`, "p")
	runtimetest.Eventually(t, 10*time.Second, "both settled", func() bool { return runtest.Settled(rt, "greeter", 2) })
	c := &permissionCase{admin: admin, violations: &runtimetest.LogBuffer{}}
	nc, err := nats.Connect(url, nats.UserInfo("jetfn", "jetfn"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		fmt.Fprintln(c.violations, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	srv, err := console.New(console.Config{NATS: nc, Deployment: "default", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		DeadLetter: m(t).DeadLetter}, console.WithToken(permToken))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	c.base = ts.URL
	return c
}

func m(t *testing.T) *manifest.Manifest {
	t.Helper()
	parsed, err := manifest.Parse([]byte(runtest.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

// readEverything opens every page and checks each shows what the stack
// holds.
func (c *permissionCase) readEverything(t *testing.T) {
	t.Helper()
	runtimetest.Eventually(t, 20*time.Second, "the greeter's instance, revision and consumer", func() bool {
		body := c.get(t, "/functions")
		return strings.Contains(body, "fn-greeter") && strings.Contains(body, "rev 1") && !strings.Contains(body, "consumer:")
	})
	runs := c.get(t, "/functions/greeter/runs")
	if !strings.Contains(runs, "dead_letter") || !strings.Contains(runs, ">ack<") {
		t.Errorf("runs page lacks the two runs:\n%s", runs)
	}
	for path, want := range map[string]string{
		"/deadletters":                   "poisoned greeting",
		"/deadletters/1":                 "Jetfn-Error",
		"/deploys":                       "diff from 1",
		"/deploys/diff?from=1&to=2":      "concurrency: 3",
		"/confirm/replay?seq=1":          ":replay:1",
		"/confirm/rollback":              "concurrency: 2",
		"/confirm/replay-set?q=poisoned": "Replay 1 dead letters?",
	} {
		if body := c.get(t, path); !strings.Contains(body, want) {
			t.Errorf("%s lacks %q:\n%s", path, want, body)
		}
	}
}

func (c *permissionCase) get(t *testing.T, path string) string {
	t.Helper()
	res, err := http.Get(c.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", path, res.Status, body)
	}
	return string(body)
}

// act posts an action with the token as a bearer and returns where it
// sent the browser.
func (c *permissionCase) act(t *testing.T, action string, form url.Values, want int) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+"/actions/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+permToken)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("POST %s: %s, want %d\n%s", action, res.Status, want, body)
	}
	return res.Header.Get("Location")
}
