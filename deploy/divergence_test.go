package deploy

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// The tests in this file are issue 29, item 6: instances that follow one
// deployment must not diverge.

// followFrom runs an instance of fns following deployment "app" from its
// current revision, with opts, until the test ends.
func followFrom(t *testing.T, url string, fns []jetfn.Function, opts ...runtime.Option) *runtime.Runtime {
	t.Helper()
	nc := runtimetest.Connect(t, url)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	current, err := Load(ctx, js, "app")
	if err != nil {
		t.Fatal(err)
	}
	m, err := current.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	rt, err := runtime.New(nc, m, fns, append([]runtime.Option{runtime.WithLogger(log)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	rt.SetRevision(current.Number)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := rt.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	<-rt.Ready()
	wg.Go(func() {
		if err := Follow(ctx, js, "app", current.Number, rt, log); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Follow: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return rt
}

// createConsumer makes durable's pull consumer as an administrator does
// for instances without provisioning rights.
func createConsumer(t *testing.T, js jetstream.JetStream, durable, subject string) {
	t.Helper()
	if _, err := js.CreateOrUpdateConsumer(context.Background(), "TEST", jetstream.ConsumerConfig{Durable: durable,
		FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: -1}); err != nil {
		t.Fatal(err)
	}
}

// TestRefusalThatMayPassIsRetried: an instance without provisioning
// refuses a revision whose new function's consumer an administrator has
// not created yet. Once it exists, the instance applies the revision by
// itself. Before the fix a refused revision was never tried again: the
// instance ran the old one until the next deploy, beside instances that
// applied it.
func TestRefusalThatMayPassIsRetried(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	js, _ := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	ctx := context.Background()
	for name, subject := range map[string]string{"TEST": "test.>", "DEADLETTER": "deadletter.>"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	createConsumer(t, js, "alpha", "test.a")
	if _, err := Store(ctx, js, "app", manifestWith(alpha("5s"))); err != nil {
		t.Fatal(err)
	}
	h := &handled{times: map[string]int{}}
	rt := followFrom(t, ns.ClientURL(), []jetfn.Function{h.fn("alpha"), h.fn("beta")}, runtime.WithoutProvisioning())

	next := manifestWith(alpha("5s"), beta)
	rev, err := Store(ctx, js, "app", next)
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.Eventually(t, 10*time.Second, "the revision refused", func() bool {
		s := rt.Stats()
		return len(s) == 1 && strings.Contains(s[0].ManifestRefused, "beta")
	})
	createConsumer(t, js, "beta", "test.b")
	m, _ := manifest.Parse(next)
	runtimetest.Eventually(t, 20*time.Second, "the revision applied once beta's consumer exists", func() bool {
		return rt.Manifest().Digest == m.Digest
	})
	for _, s := range rt.Stats() {
		if s.Revision != rev || s.ManifestRefused != "" {
			t.Errorf("%s: revision %d, refused %q; want revision %d and no refusal", s.Function, s.Revision, s.ManifestRefused, rev)
		}
	}
}

// TestRollbacksGoOnBack: a second rollback restores the revision before
// the one the first restored, instead of undoing the first; and a rollback
// computed on a history that changed since is refused, not stored over
// the newer revision. Before the fix the second rollback put back the
// revision the first had rolled back from.
func TestRollbacksGoOnBack(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	js, _ := jetstream.New(runtimetest.Connect(t, ns.ClientURL()))
	ctx := context.Background()
	for _, v := range []string{"a", "b", "c"} {
		if _, err := Store(ctx, js, "app", []byte("# "+v+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"# b\n", "# a\n"} {
		if _, to, err := Rollback(ctx, js, "app"); err != nil || string(to.Raw) != want {
			t.Fatalf("rollback restored %q (%v), want %q", to.Raw, err, want)
		}
	}
	if _, _, err := Rollback(ctx, js, "app"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("a third rollback: %v, want ErrNoPrevious", err)
	}
	if cur, err := Load(ctx, js, "app"); err != nil || string(cur.Raw) != "# a\n" {
		t.Fatalf("current %q (%v), want # a", cur.Raw, err)
	}
}
