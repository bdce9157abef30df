package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/discovery"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// pingerPermissions are those of a client that may only ask micro
// discovery: publish $SRV.PING, read its own inbox.
const pingerPermissions = `permissions: { publish: { allow: ["$SRV.PING"] }, subscribe: { allow: ["_INBOX.>"] } }`

// TestGeneratedPermissionsRefuseRelay: a client allowed nothing but
// $SRV.PING names a reply subject outside every inbox. The instance, with
// exactly the generated permissions, must not publish there: its answer
// would purge a stream on a server whose JetStream API is not strict (the
// answer's unknown fields are ignored, so it reads as "purge everything"),
// and would land in a subject neither it nor the pinger may publish on
// anywhere else.
func TestGeneratedPermissionsRefuseRelay(t *testing.T) {
	tests := []struct {
		name   string
		opts   []runtimetest.AccountsOption
		reply  string
		effect func(r *relayCase, t *testing.T) func() string // what the answer did, "" while nothing
	}{
		{name: "purge on a server without strict JetStream", opts: []runtimetest.AccountsOption{runtimetest.NotStrict()},
			reply: "$JS.API.STREAM.PURGE.TEST", effect: (*relayCase).purged},
		{name: "injection into a subject outside the allow lists",
			reply: "audit.entries", effect: (*relayCase).injected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := permsManifest(t)
			opts := append([]runtimetest.AccountsOption{runtimetest.WithUser("pinger", pingerPermissions)}, tt.opts...)
			r := startRelayCase(t, m, opts...)
			effect := tt.effect(r, t)
			pinger := runtimetest.Connect(t, runtimetest.UserURL(r.url, "pinger"))
			if err := pinger.PublishRequest("$SRV.PING", tt.reply, nil); err != nil {
				t.Fatal(err)
			}
			// Either the answer's effect shows, or the server refuses the
			// instance's publish (and nothing reaches the subject).
			runtimetest.Eventually(t, 20*time.Second, "the answer to land on "+tt.reply+" or be refused", func() bool {
				return effect() != "" || slices.Contains(r.log.Violations(), tt.reply)
			})
			if got := effect(); got != "" {
				t.Fatalf("a PING with reply subject %s: %s", tt.reply, got)
			}
		})
	}
}

// relayCase is an instance running one function as the user "jetfn" with
// the generated permissions, beside an admin who provisioned its streams.
type relayCase struct {
	url   string
	admin *nats.Conn
	js    jetstream.JetStream
	log   *runtimetest.LogBuffer
}

func startRelayCase(t *testing.T, m *manifest.Manifest, opts ...runtimetest.AccountsOption) *relayCase {
	t.Helper()
	url := runtimetest.StartAccountsServer(t, m.Permissions(manifest.PermissionOptions{}).ServerConfig(), opts...)
	admin := runtimetest.Connect(t, runtimetest.UserURL(url, "admin"))
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	provision(t, js, m)
	r := &relayCase{url: url, admin: admin, js: js, log: &runtimetest.LogBuffer{}}
	var fns []jetfn.Function
	for _, f := range m.Functions {
		fns = append(fns, jetfn.Function{Name: f.Name, New: permsHandler})
	}
	user := runtimetest.Connect(t, runtimetest.UserURL(url, "jetfn"))
	rt, err := New(user, m, fns, WithoutProvisioning(), WithDrainTimeout(100*time.Millisecond),
		WithLogger(slog.New(slog.NewTextHandler(r.log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
	// Ready means subscribed; the flush means the server knows it.
	if err := user.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// purged stores three messages on TEST; the effect is their loss.
func (r *relayCase) purged(t *testing.T) func() string {
	for i := range 3 {
		if _, err := r.js.Publish(context.Background(), "test.kept", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	return func() string {
		info, err := r.stream(t).Info(context.Background())
		if err != nil || info.State.Msgs == 3 {
			return ""
		}
		return fmt.Sprintf("the instance's answer purged stream TEST: %d of 3 messages left", info.State.Msgs)
	}
}

func (r *relayCase) stream(t *testing.T) jetstream.Stream {
	s, err := r.js.Stream(context.Background(), "TEST")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// injected listens on audit.entries; the effect is a message there.
func (r *relayCase) injected(t *testing.T) func() string {
	got := make(chan *nats.Msg, 4)
	if _, err := r.admin.ChanSubscribe("audit.entries", got); err != nil {
		t.Fatal(err)
	}
	if err := r.admin.Flush(); err != nil {
		t.Fatal(err)
	}
	var seen string
	return func() string {
		select {
		case m := <-got:
			seen = fmt.Sprintf("the instance published %q on audit.entries, a subject outside its allow list", m.Data)
		default:
		}
		return seen
	}
}

// TestGeneratedPermissionsDiscovery: with two functions on one instance
// running with exactly the generated permissions, one discovery request
// (as `nats micro ls` and `jetfn status` send) gets both functions' answers,
// and each status endpoint answers, without a permissions violation.
func TestGeneratedPermissionsDiscovery(t *testing.T) {
	r := startRelayCase(t, twoFunctions(t, "", true))
	tests := []struct {
		subject string
		want    int
	}{
		{subject: "$SRV.PING", want: 2},
		{subject: "$SRV.INFO", want: 2},
		{subject: "$SRV.STATS", want: 2},
		{subject: "fn.status", want: 1},
		{subject: "fn2.status", want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.subject, func(t *testing.T) {
			// Every round must be answered in full: one answer is enough
			// for `nats micro ls` to be wrong.
			for round := 1; round <= 3; round++ {
				replies, err := discovery.Gather(context.Background(), r.admin, tt.subject, 500*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if len(replies) != tt.want {
					t.Fatalf("%s round %d got %d of %d answers (%s)", tt.subject, round, len(replies), tt.want, violationSummary(r.log))
				}
			}
		})
	}
	if v := r.log.Violations(); len(v) > 0 {
		t.Fatalf("permission violations: %s", violationSummary(r.log))
	}
}

// violationSummary names the first violation and counts them: a refused
// reply repeats on every request.
func violationSummary(log *runtimetest.LogBuffer) string {
	v := log.Violations()
	if len(v) == 0 {
		return "no permissions violation"
	}
	return fmt.Sprintf("%d permissions violations, the first on %s", len(v), v[0])
}
