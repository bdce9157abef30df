package devstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Names inside a data directory.
const (
	lockName    = "dev.lock" // held while a stack runs; holds its pid
	createdName = "created"  // when the directory was started fresh, RFC 3339
	natsName    = "nats"
	mongoName   = "mongo"
)

// Dir is a stack's data directory, held for one stack at a time.
type Dir struct {
	Path string
	// Reused is true when the directory already held a stack's data.
	Reused bool
	// Created is when the directory was started fresh; zero when a jetfn
	// older than this field made it.
	Created time.Time
	lock    *dirLock
}

// OpenDir takes the directory at path for one stack, creating it if
// needed; call Prepare before starting servers on it. A directory another
// process holds is ErrDirInUse, naming that process. The hold ends when the
// holder calls Close or exits in any way, SIGKILL included.
func OpenDir(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	lock, err := lockDir(filepath.Join(path, lockName))
	if err != nil {
		return nil, err
	}
	return &Dir{Path: path, lock: lock}, nil
}

// Prepare wipes what the directory holds when fresh is set, then finds
// whether it holds a stack's data (Reused) and since when (Created).
func (d *Dir) Prepare(fresh bool) error {
	if fresh {
		if err := d.wipe(); err != nil {
			return err
		}
	}
	d.Reused = exists(d.NATSDir()) || exists(d.MongoDir())
	if !d.Reused {
		_ = os.Remove(filepath.Join(d.Path, createdName))
	}
	return d.readCreated()
}

// readCreated reads the directory's birth, writing it for a new one.
func (d *Dir) readCreated() error {
	file := filepath.Join(d.Path, createdName)
	raw, err := os.ReadFile(file)
	switch {
	case err == nil:
		d.Created, _ = time.Parse(time.RFC3339, strings.TrimSpace(string(raw)))
		return nil
	case !errors.Is(err, os.ErrNotExist) || d.Reused:
		return nil // an older directory, without a birth date
	}
	d.Created = time.Now().Truncate(time.Second)
	if err := os.WriteFile(file, []byte(d.Created.Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return fmt.Errorf("opening %s: %w", d.Path, err)
	}
	return nil
}

// wipe removes everything but the lock: removing the lock file while it is
// held would let a second stack create and take a new one.
func (d *Dir) wipe() error {
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		return fmt.Errorf("wiping %s: %w", d.Path, err)
	}
	for _, e := range entries {
		if e.Name() == lockName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(d.Path, e.Name())); err != nil {
			return fmt.Errorf("wiping %s: %w", d.Path, err)
		}
	}
	return nil
}

// NATSDir is nats-server's store directory.
func (d *Dir) NATSDir() string { return filepath.Join(d.Path, natsName) }

// MongoDir is FerretDB's data directory.
func (d *Dir) MongoDir() string { return filepath.Join(d.Path, mongoName) }

// Close lets another stack open the directory.
func (d *Dir) Close() { d.lock.release() }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// inUse is ErrDirInUse naming the holder, whose pid the lock file holds.
func inUse(lockFile string, raw []byte) error {
	holder := "another process"
	if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && pid > 0 {
		holder = fmt.Sprintf("pid %d", pid)
	}
	return fmt.Errorf("%w: %s holds %s; stop that stack first, or give this one its own --dir",
		ErrDirInUse, holder, lockFile)
}
