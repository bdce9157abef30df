package runtime

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// TestRemotePermissions runs a remote function as a user with exactly the
// generated permissions: requests, outputs and the discovery probe work
// without a violation. Without the remote subject, or without $SRV.INFO,
// the server refuses the request or the probe, naming the subject.
func TestRemotePermissions(t *testing.T) {
	m := remoteManifest(t, "    ackWait: 2s\n    backoff: [200ms]\n    maxDeliver: 100\n")
	full := m.Permissions(manifest.PermissionOptions{})
	tests := []struct {
		name          string
		drop          string
		wantViolation string
	}{
		{name: "generated permissions suffice"},
		{name: "without the remote subject", drop: "remote.fn", wantViolation: "remote.fn"},
		{name: "without $SRV.INFO", drop: "$SRV.INFO", wantViolation: "$SRV.INFO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			perms := full
			perms.Publish = slices.DeleteFunc(slices.Clone(perms.Publish), func(s string) bool { return s == tt.drop })
			url := runtimetest.StartAccountsServer(t, perms.ServerConfig())
			adminURL := strings.Replace(url, "nats://", "nats://admin:admin@", 1)
			admin := runtimetest.Connect(t, adminURL)
			js, err := jetstream.New(admin)
			if err != nil {
				t.Fatal(err)
			}
			env := &testEnv{t: t, nc: admin, js: js}
			provision(t, js, m)
			runtimetest.StartRemote(t, adminURL, "test-remote", "remote.fn", func(req micro.Request, _ int) {
				_ = req.Respond([]byte(`{"outputs":[{"subject":"test.out","data":1,"key":"` + req.Headers().Get(wire.HeaderRemoteMsgID) + `"}]}`))
			})
			log := &runtimetest.LogBuffer{}
			user, err := nats.Connect(strings.Replace(url, "nats://", "nats://jetfn:jetfn@", 1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(user.Close)
			rt, err := New(user, m, nil, WithoutProvisioning(), WithDrainTimeout(100*time.Millisecond),
				WithLogger(slog.New(slog.NewTextHandler(log, nil))), withRemoteProbe(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			runtimetest.RunInBackground(t, rt)
			env.publish("test.in", "a")
			if tt.wantViolation != "" {
				runtimetest.Eventually(t, 20*time.Second, "a violation on "+tt.wantViolation, func() bool {
					return slices.Contains(log.Violations(), tt.wantViolation)
				})
				return
			}
			runtimetest.Eventually(t, 20*time.Second, "the output and the instance found", func() bool {
				s := rt.Stats()[0]
				return s.Acked == 1 && s.RemoteInstances == 1
			})
			if v := log.Violations(); len(v) > 0 {
				t.Fatalf("violations %v with the generated permissions %v\n%s", v, full.Publish, log.String())
			}
		})
	}
}
