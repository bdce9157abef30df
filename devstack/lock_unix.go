//go:build unix

package devstack

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
)

// dirLock is an flock(2) on the lock file. The kernel drops it when the
// holder's file is closed, so a crashed or killed stack never leaves a
// stale lock behind, whatever pid the file still names.
type dirLock struct{ f *os.File }

func lockDir(path string) (*dirLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		raw, _ := io.ReadAll(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, inUse(path, raw)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := writePID(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

func (l *dirLock) release() {
	_ = l.f.Truncate(0)
	_ = l.f.Close() // closing drops the flock
}
