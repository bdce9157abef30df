package console

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/deploy"
)

// revisionCache is the deployment's revisions, read from the KV history
// at most every few polls (each read is a short-lived ordered consumer),
// and at once after a rollback.
type revisionCache struct {
	js         jetstream.JetStream
	deployment string

	mu    sync.Mutex
	revs  []revisionView
	err   error
	read  time.Time
	stale bool
}

// revisionView is one revision and the digest its instances report.
type revisionView struct {
	deploy.Revision
	Digest string
	// Functions is how many functions it runs; -1 when it does not parse.
	Functions int
}

// refreshIfStale reads the history again when the last read is older than
// maxAge or was marked stale.
func (c *revisionCache) refreshIfStale(ctx context.Context, maxAge time.Duration) {
	c.mu.Lock()
	fresh := !c.stale && !c.read.IsZero() && time.Since(c.read) < maxAge
	c.mu.Unlock()
	if fresh {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	revs, err := deploy.Revisions(ctx, c.js, c.deployment)
	views := make([]revisionView, 0, len(revs))
	for _, r := range revs {
		v := revisionView{Revision: r, Functions: -1}
		if m, err := r.Manifest(); err == nil {
			v.Digest, v.Functions = m.Digest, len(m.Functions)
		}
		views = append(views, v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revs, c.err, c.read, c.stale = views, err, time.Now(), false
}

func (c *revisionCache) markStale() {
	c.mu.Lock()
	c.stale = true
	c.mu.Unlock()
}

// list is the revisions, newest first, and the last read's error.
func (c *revisionCache) list() ([]revisionView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]revisionView(nil), c.revs...), c.err
}

// byDigest maps each digest to the newest revision with it.
func (c *revisionCache) byDigest() map[string]uint64 {
	revs, _ := c.list()
	out := map[string]uint64{}
	for _, r := range revs {
		if _, seen := out[r.Digest]; !seen && r.Digest != "" {
			out[r.Digest] = r.Number
		}
	}
	return out
}

// find is the revision numbered n.
func (c *revisionCache) find(n uint64) (revisionView, bool) {
	revs, _ := c.list()
	for _, r := range revs {
		if r.Number == n {
			return r, true
		}
	}
	return revisionView{}, false
}
