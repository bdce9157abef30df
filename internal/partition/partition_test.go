package partition_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/internal/partition"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// TestOfAgreesWithTheServer stores keys through a stream whose subject
// transform partitions them, and checks Of puts every key where the server
// did: a key jetfn hashes itself (a header, a JSON field) and the same key
// hashed by the server (a subject token) must share a partition.
func TestOfAgreesWithTheServer(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 16
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KEYS", Subjects: []string{"k.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "k.*", Destination: fmt.Sprintf("p.{{partition(%d,1)}}.{{wildcard(1)}}", n)}})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"alice", "bob", "k-42", "žluťoučký", "0", "order-9f3a2c", strings.Repeat("x", 200)}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("key-%d", i))
	}
	for _, k := range keys {
		if _, err := js.Publish(ctx, "k."+k, nil); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int]bool{}
	for i, k := range keys {
		m, err := s.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("p.%d.%s", partition.Of([]byte(k), n), k)
		if m.Subject != want {
			t.Errorf("key %q stored as %s, Of says %s", k, m.Subject, want)
		}
		seen[partition.Of([]byte(k), n)] = true
	}
	if len(seen) != n {
		t.Errorf("%d keys fell in %d of %d partitions, want all used", len(keys), len(seen), n)
	}
}
