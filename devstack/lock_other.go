//go:build !unix

package devstack

// dirLock does nothing where there is no flock(2): on such systems two
// stacks on one directory are not refused.
type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() {}
