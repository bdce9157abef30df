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
