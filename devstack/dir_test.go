package devstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestOpenDir: one stack at a time holds a directory, the next one is told
// who holds it, and Prepare tells a new directory from a reused one.
func TestOpenDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".jetfn")
	d, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(false); err != nil || d.Reused || d.Created.IsZero() {
		t.Fatalf("a new dir: %v, reused %v, created %v; want not reused and a birth time", err, d.Reused, d.Created)
	}
	if runtime.GOOS != "windows" {
		_, err := OpenDir(path)
		want := fmt.Sprintf("pid %d holds %s", os.Getpid(), filepath.Join(path, lockName))
		if !errors.Is(err, ErrDirInUse) || !strings.Contains(err.Error(), want) {
			t.Fatalf("a second OpenDir: %v, want ErrDirInUse naming %q", err, want)
		}
	}
	if err := os.MkdirAll(d.NATSDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	created := d.Created
	d.Close()

	again, err := OpenDir(path)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	defer again.Close()
	if err := again.Prepare(false); err != nil || !again.Reused || !again.Created.Equal(created) {
		t.Fatalf("reopened: %v, reused %v, created %v; want reused, created %v", err, again.Reused, again.Created, created)
	}
	if err := again.Prepare(true); err != nil || again.Reused || exists(again.NATSDir()) {
		t.Fatalf("fresh: %v, reused %v; want the data wiped", err, again.Reused)
	}
	if !exists(filepath.Join(path, lockName)) {
		t.Error("fresh removed the lock file it holds")
	}
}
