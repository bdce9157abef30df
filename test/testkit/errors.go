package testkit

import "errors"

var (
	// ErrDeadline is returned by Poll when its condition never held.
	ErrDeadline = errors.New("deadline passed")
	// ErrNoLeader is returned by Leaders while the stream or the consumer
	// has no leader: an election is under way.
	ErrNoLeader = errors.New("no leader yet")
	// ErrScanStalled is returned by ScanNotifications when a fetch brought
	// nothing while its consumer still had messages pending: the server
	// was too busy to deliver within the fetch's wait, or the consumer's
	// server went away. The messages are in the stream; a scan that starts
	// over reads them.
	ErrScanStalled = errors.New("scan stalled")
)
