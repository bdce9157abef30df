package runtime

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime/runtimetest"
	"github.com/jetfn/jetfn/wire"
)

// TestDeadLetterOfServerInterpretedHeaders is issue 29, item 7: a message
// stored with a header the server acts on (Nats-TTL, Nats-Rollup,
// Nats-Incr, …) must still become a dead letter. Copied as they are, the
// headers made DEADLETTER, which allows none of those features, refuse the
// copy: the message looped at the last backoff for ever and nothing was
// counted. Each input's stream allows its header, as an administrator
// would have set it up; jetfn keeps those settings when it updates the
// stream.
func TestDeadLetterOfServerInterpretedHeaders(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "TEST", Subjects: []string{"test.>"}, AllowMsgTTL: true, AllowRollup: true},
		{Name: "COUNTERS", Subjects: []string{"counter.>"}, AllowMsgCounter: true},
	} {
		if _, err := env.js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	m, err := manifest.Parse([]byte(`
streams:
  - name: TEST
    subjects: ["test.>"]
  - name: COUNTERS
    subjects: ["counter.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - {name: fn, version: 1.0.0, stream: TEST, subject: test.in, ackWait: 2s, maxDeliver: 2, backoff: [10ms]}
  - {name: counted, version: 1.0.0, stream: COUNTERS, subject: counter.in, ackWait: 2s, maxDeliver: 2, backoff: [10ms]}
`))
	if err != nil {
		t.Fatal(err)
	}
	refuse := jetfn.HandlerFunc(func(context.Context, jetfn.Msg) error { return jetfn.Permanent(errors.New("refused")) })
	fns := []jetfn.Function{
		{Name: "fn", New: func(jetfn.Deps) (jetfn.Handler, error) { return refuse, nil }},
		{Name: "counted", New: func(jetfn.Deps) (jetfn.Handler, error) { return refuse, nil }},
	}
	rt, err := New(env.nc, m, fns, WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	env.run(rt)

	// The rollup goes first: a subject rollup purges what test.in held
	// before it, which took the TTL message whenever it was stored before
	// fn had been given that one (3 runs of 20).
	inputs := []*nats.Msg{
		{Subject: "test.in", Data: []byte("rollup"), Header: nats.Header{"Nats-Rollup": {"sub"}}},
		{Subject: "test.in", Data: []byte("ttl"), Header: nats.Header{"Nats-TTL": {"1h"}}},
		{Subject: "counter.in", Header: nats.Header{"Nats-Incr": {"+1"}}},
	}
	for _, in := range inputs {
		if _, err := env.js.PublishMsg(ctx, in); err != nil {
			t.Fatalf("publishing with %v: %v", in.Header, err)
		}
	}
	runtimetest.Eventually(t, 20*time.Second, "three dead letters", func() bool {
		return env.streamMsgs("DEADLETTER") >= 3
	})
	kept := map[string]string{}
	for _, l := range runtimetest.StreamMessages(t, env.js, "DEADLETTER") {
		for _, h := range []string{"Nats-TTL", "Nats-Rollup", "Nats-Incr"} {
			if l.Header.Get(h) != "" {
				t.Errorf("dead letter %d kept %s, which DEADLETTER would act on", l.Sequence, h)
			}
			if v := l.Header.Get(wire.HeaderOriginalPrefix + h); v != "" {
				kept[h] = v
			}
		}
	}
	if want := map[string]string{"Nats-TTL": "1h", "Nats-Rollup": "sub", "Nats-Incr": "+1"}; !maps.Equal(kept, want) {
		t.Errorf("the originals' headers, kept under %s for a person to read: %v, want %v", wire.HeaderOriginalPrefix, kept, want)
	}
}
