package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Revisions returns the deployment's stored revisions, newest first (the
// bucket keeps the last History). It only reads: nothing deployed yet, or
// no bucket, is an empty list.
func Revisions(ctx context.Context, js jetstream.JetStream, deployment string) ([]Revision, error) {
	kv, err := open(ctx, js)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := kv.History(ctx, deployment)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s: %w", deployment, err)
	}
	var out []Revision
	for _, e := range puts(entries) {
		out = append(out, Revision{Number: e.Revision(), Raw: e.Value(), Created: e.Created()})
	}
	slices.Reverse(out)
	return out, nil
}
