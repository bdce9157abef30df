package publishrecordingevent

import (
	"context"
	"hash/maphash"
)

// lockStripes is how many recordings can be recorded at once in a process.
const lockStripes = 64

// recordingLocks serializes the handlers of one recording inside a process.
//
// It exists because FerretDB (v1.24, SQLite) applies an update by reading
// the document, changing it in Go and writing the whole document back, with
// nothing in between to stop another writer: 40 concurrent $inc on one
// document left it at 5. MongoDB applies each single-document update
// atomically, which is all store.go needs, so with MongoDB several
// instances are safe. With FerretDB, several instances are safe only when
// the manifest keys the function by recordingId and orders it, as the
// shipped manifests do: then no two runs of one recording happen at once
// anywhere, and these locks never wait. A manifest without that needs one
// instance (any concurrency), which these locks keep right.
type recordingLocks struct {
	seed    maphash.Seed
	stripes [lockStripes]chan struct{}
}

func newRecordingLocks() *recordingLocks {
	l := &recordingLocks{seed: maphash.MakeSeed()}
	for i := range l.stripes {
		l.stripes[i] = make(chan struct{}, 1)
	}
	return l
}

// lock waits for the recording's stripe, or for ctx. Two recordings may
// share a stripe; that costs parallelism, not correctness.
func (l *recordingLocks) lock(ctx context.Context, recordingID string) (unlock func(), err error) {
	stripe := l.stripes[maphash.String(l.seed, recordingID)%lockStripes]
	select {
	case stripe <- struct{}{}:
		return func() { <-stripe }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
