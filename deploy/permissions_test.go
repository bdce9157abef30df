package deploy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// The deployment these tests follow: alpha and beta live, then a revision
// that removes beta, which --prune deletes the consumer of.
var (
	bothRevision  = manifestWith(alpha("2s"), beta)
	alphaRevision = manifestWith(alpha("2s"))
)

func deploymentPermissions(t *testing.T, provision bool) manifest.Permissions {
	t.Helper()
	m, err := manifest.Parse(bothRevision)
	if err != nil {
		t.Fatal(err)
	}
	return m.Permissions(manifest.PermissionOptions{Deployment: "app", Prune: true, Provision: provision})
}

// TestDeploymentPermissionsSufficient runs `jetfn run --deployment app
// --prune` as a user with exactly what `jetfn permissions --deployment app
// --prune` generates: the instance loads the live revision, handles, applies
// a revision that removes beta, prunes beta's consumer and stops (its watch
// consumer removed), all without a permissions violation.
func TestDeploymentPermissionsSufficient(t *testing.T) {
	tests := []struct {
		name      string
		provision bool
	}{
		{name: "streams from an admin (--no-provision)", provision: false},
		{name: "self-provisioned (--provision)", provision: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startDeploymentCase(t, deploymentPermissions(t, tt.provision), tt.provision)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("instance log:\n%s", p.log.String())
				}
			})
			if !p.waitReady(func() bool { return false }) {
				t.Fatal("the instance ended before it was ready")
			}
			for _, subj := range []string{"test.a", "test.b"} {
				if _, err := p.admin.Publish(context.Background(), subj, []byte(subj+"-1")); err != nil {
					t.Fatal(err)
				}
			}
			runtimetest.Eventually(t, 20*time.Second, "alpha and beta handled", func() bool {
				return p.h.count("test.a-1") == 1 && p.h.count("test.b-1") == 1
			})
			p.deploy(t, alphaRevision)
			runtimetest.Eventually(t, 20*time.Second, "beta removed and its consumer pruned", func() bool {
				return p.runs(alphaRevision) && p.consumerGone("TEST", "beta")
			})
			last := p.flood(t)
			runtimetest.Eventually(t, 30*time.Second, "the revision after the watch's flow control", func() bool { return p.runs(last) })
			p.stop()
			runtimetest.Eventually(t, 20*time.Second, "the watch's consumer removed", func() bool {
				return p.consumers("KV_"+Bucket) == 0
			})
			if v := p.log.Violations(); len(v) > 0 {
				t.Fatalf("permission violations with the generated permissions: %v", v)
			}
		})
	}
}

// TestDeploymentPermissionsMinimal removes each right that --deployment and
// --prune add, one at a time: each removal must show up as a permissions
// violation naming the refused subject.
func TestDeploymentPermissionsMinimal(t *testing.T) {
	full := deploymentPermissions(t, false)
	m, err := manifest.Parse(bothRevision)
	if err != nil {
		t.Fatal(err)
	}
	base := m.Permissions(manifest.PermissionOptions{})
	// Deleting alpha's consumer is the same right as beta's; the scenario
	// removes only beta.
	sameAsBeta := "$JS.API.CONSUMER.DELETE.TEST.alpha"
	var added []string
	for _, s := range full.Publish {
		if !slices.Contains(base.Publish, s) && s != sameAsBeta {
			added = append(added, s)
		}
	}
	if len(added) == 0 {
		t.Fatal("--deployment and --prune add no publish rights")
	}
	if !slices.Equal(full.Subscribe, base.Subscribe) {
		t.Fatalf("--deployment changed the subscribe rights: %v, want %v", full.Subscribe, base.Subscribe)
	}
	for _, removed := range added {
		t.Run(removed, func(t *testing.T) {
			perms := full
			perms.Publish = slices.DeleteFunc(slices.Clone(full.Publish), func(s string) bool { return s == removed })
			p := startDeploymentCase(t, perms, false)
			refused := func() bool {
				return slices.ContainsFunc(p.log.Violations(), func(s string) bool { return manifest.SubjectCovered(s, removed) })
			}
			// Drive the scenario as far as the missing right lets it go.
			if p.waitReady(refused) {
				p.deploy(t, alphaRevision)
				runtimetest.Eventually(t, 20*time.Second, "the revision applied or refused", func() bool {
					return refused() || p.runs(alphaRevision) && p.consumerGone("TEST", "beta")
				})
			}
			if !refused() {
				last := p.flood(t)
				runtimetest.Eventually(t, 30*time.Second, "the last revision applied or refused", func() bool {
					return refused() || p.runs(last)
				})
			}
			p.stop()
			runtimetest.Eventually(t, 20*time.Second, "a violation on "+removed, refused)
			t.Logf("reported: %v", p.log.Violations())
		})
	}
}

// deploymentCase is an instance following deployment "app" as the
// restricted user, against a server where an admin stored the live
// revision.
type deploymentCase struct {
	admin jetstream.JetStream
	log   *runtimetest.LogBuffer
	h     *handled
	rt    atomic.Pointer[runtime.Runtime]
	ready chan struct{}
	done  chan struct{}
	stop  func()
}

// startDeploymentCase stores bothRevision as an admin (who provisions the
// streams and consumers too unless selfProvision), then starts the
// instance as the user "jetfn" with perms.
func startDeploymentCase(t *testing.T, perms manifest.Permissions, selfProvision bool) *deploymentCase {
	t.Helper()
	url := runtimetest.StartAccountsServer(t, perms.ServerConfig())
	adminNC := runtimetest.Connect(t, strings.Replace(url, "nats://", "nats://admin:admin@", 1))
	admin, err := jetstream.New(adminNC)
	if err != nil {
		t.Fatal(err)
	}
	p := &deploymentCase{admin: admin, log: &runtimetest.LogBuffer{}, h: &handled{times: map[string]int{}},
		ready: make(chan struct{}), done: make(chan struct{})}
	p.deploy(t, bothRevision)
	fns := []jetfn.Function{p.h.fn("alpha"), p.h.fn("beta")}
	opts := []runtime.Option{runtime.WithPrune(), runtime.WithDrainTimeout(100 * time.Millisecond)}
	if !selfProvision {
		provisionAsAdmin(t, adminNC, fns)
		opts = append(opts, runtime.WithoutProvisioning())
	}
	// The user's own handler sees what the server refuses before the
	// runtime installs its own (while loading the revision).
	user, err := nats.Connect(strings.Replace(url, "nats://", "nats://jetfn:jetfn@", 1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			fmt.Fprintf(p.log, "async error: %v\n", err)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(user.Close)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(p.done)
		if err := p.follow(ctx, user, fns, opts); err != nil {
			fmt.Fprintf(p.log, "instance: %v\n", err)
		}
	}()
	var once sync.Once
	p.stop = func() { once.Do(func() { cancel(); <-p.done }) }
	t.Cleanup(p.stop)
	return p
}

// follow runs the instance the way cmd/jetfn's serve and whenReady do for
// --deployment: the live revision from KV, the runtime, then Follow once
// every function is bound.
func (p *deploymentCase) follow(ctx context.Context, nc *nats.Conn, fns []jetfn.Function, opts []runtime.Option) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	rev, err := Load(ctx, js, "app")
	if err != nil {
		return err
	}
	m, err := rev.Manifest()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(p.log, nil))
	rt, err := runtime.New(nc, m, fns, append(opts, runtime.WithLogger(log))...)
	if err != nil {
		return err
	}
	p.rt.Store(rt)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		select {
		case <-rt.Ready():
			close(p.ready)
		case <-ctx.Done():
			return
		}
		if err := Follow(ctx, js, "app", rev.Number, rt, log); err != nil {
			log.Error("following the deployment stopped", "err", err)
		}
	})
	return rt.Run(ctx)
}

// waitReady waits until the instance is ready (true), or it ended or
// stop() holds (false).
func (p *deploymentCase) waitReady(stop func() bool) bool {
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-p.ready:
			return true
		case <-p.done:
			return false
		case <-deadline:
			return false
		case <-time.After(10 * time.Millisecond):
			if stop() {
				return false
			}
		}
	}
}

// flood stores floodRevisions revisions of about 600 KiB each, then a
// small one it returns. The watch then asks for flow control: past 1 MiB
// delivered the server wants a reply on $JS.FC.<stream>.<consumer>.<token>,
// and past 2 MiB it delivers nothing more until it gets one, so an
// instance that may not answer never sees the last revision.
func (p *deploymentCase) flood(t *testing.T) []byte {
	t.Helper()
	padding := "# " + strings.Repeat("x", 600<<10) + "\n"
	for i := range floodRevisions {
		p.deploy(t, append(manifestWith(alpha("2s")), fmt.Sprintf("# %d\n%s", i, padding)...))
	}
	last := manifestWith(alpha("3s"))
	p.deploy(t, last)
	return last
}

const floodRevisions = 5

func (p *deploymentCase) deploy(t *testing.T, raw []byte) {
	t.Helper()
	if _, err := Store(context.Background(), p.admin, "app", raw); err != nil {
		t.Fatal(err)
	}
}

// runs reports whether the instance runs the manifest raw.
func (p *deploymentCase) runs(raw []byte) bool {
	rt := p.rt.Load()
	m, err := manifest.Parse(raw)
	return rt != nil && err == nil && rt.Manifest().Digest == m.Digest
}

func (p *deploymentCase) consumerGone(stream, durable string) bool {
	_, err := p.admin.Consumer(context.Background(), stream, durable)
	return errors.Is(err, jetstream.ErrConsumerNotFound)
}

func (p *deploymentCase) consumers(stream string) int {
	s, err := p.admin.Stream(context.Background(), stream)
	if err != nil {
		return -1
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return -1
	}
	return info.State.Consumers
}

// provisionAsAdmin creates bothRevision's streams and consumers the way an
// administrator's own `jetfn run` would, and stops.
func provisionAsAdmin(t *testing.T, nc *nats.Conn, fns []jetfn.Function) {
	t.Helper()
	m, err := manifest.Parse(bothRevision)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(nc, m, fns)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	select {
	case <-rt.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("provisioning as admin: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("provisioning as admin: %v", err)
	}
}
