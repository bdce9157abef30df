package deploy

import (
	"context"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Revisions is the deployment's stored revisions, newest first (the bucket
// keeps History of them).
func Revisions(ctx context.Context, js jetstream.JetStream, deployment string) ([]Revision, error) {
	kv, err := open(ctx, js)
	if err != nil {
		return nil, err
	}
	entries, err := kv.History(ctx, deployment)
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s: %w", deployment, err)
	}
	var out []Revision
	for _, e := range puts(entries) {
		out = append(out, Revision{Number: e.Revision(), Raw: e.Value()})
	}
	slices.Reverse(out)
	return out, nil
}
