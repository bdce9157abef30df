package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/jetfn/jetfn"
)

func TestPublisherRefusesUndeclaredOutput(t *testing.T) {
	env := newEnv(t)
	var publishErr error
	h := jetfn.HandlerFunc(func(ctx context.Context, _ jetfn.Msg) error { return nil })
	m := testManifest(t, "    outputs:\n      - subject: test.out.*\n        stream: TEST\n")
	fns := []jetfn.Function{{Name: "fn", New: func(d jetfn.Deps) (jetfn.Handler, error) {
		if err := d.Publisher.Publish(context.Background(), "test.out.ok", []byte("x"), "id-1"); err != nil {
			return nil, err
		}
		publishErr = d.Publisher.Publish(context.Background(), "test.elsewhere", []byte("x"), "id-2")
		return h, nil
	}}}
	rt, err := New(env.nc, m, fns)
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	if !errors.Is(publishErr, jetfn.ErrUndeclaredOutput) || !errors.Is(publishErr, jetfn.ErrPermanent) {
		t.Fatalf("publish outside outputs: %v, want a permanent ErrUndeclaredOutput", publishErr)
	}
	if got := env.streamMsgs("TEST"); got != 1 {
		t.Fatalf("stream holds %d messages, want only the declared output", got)
	}
}

// TestPublisherRefusesEmptyKey: an output published without a key would be
// stored again by every redelivery, so it is refused as permanent; NoDedup
// publishes without a message ID on purpose, and the input's ID is a key
// that stays the same across redeliveries.
func TestPublisherRefusesEmptyKey(t *testing.T) {
	env := newEnv(t)
	var emptyErr, noDedupErr error
	m := testManifest(t, "    outputs:\n      - subject: test.out\n        stream: TEST\n")
	fns := []jetfn.Function{{Name: "fn", New: func(d jetfn.Deps) (jetfn.Handler, error) {
		emptyErr = d.Publisher.Publish(context.Background(), "test.out", []byte("x"), "")
		for range 2 {
			noDedupErr = errors.Join(noDedupErr, d.Publisher.Publish(context.Background(), "test.out", []byte("y"), jetfn.NoDedup))
		}
		return jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { return nil }), nil
	}}}
	rt, err := New(env.nc, m, fns)
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)
	if !errors.Is(emptyErr, jetfn.ErrNoOutputKey) || !errors.Is(emptyErr, jetfn.ErrPermanent) {
		t.Fatalf("publish with an empty key: %v, want a permanent ErrNoOutputKey", emptyErr)
	}
	if noDedupErr != nil {
		t.Fatalf("publish with NoDedup: %v", noDedupErr)
	}
	if got := env.streamMsgs("TEST"); got != 2 {
		t.Fatalf("stream holds %d messages, want the two NoDedup outputs and nothing for the empty key", got)
	}
}
