package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

func TestDescribeBuild(t *testing.T) {
	tests := []struct {
		name string
		info *debug.BuildInfo
		want []string
	}{
		{name: "a release installed with go install",
			info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/jetfn/jetfn", Version: "v1.2.0"}},
			want: []string{"jetfn v1.2.0\n", "revision unknown"}},
		{name: "a build in a clone with changes",
			info: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201135400-3adadda1b2c3+dirty"},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "3adadda1b2c3d4e5"}, {Key: "vcs.time", Value: "2026-12-01T13:54:00Z"},
					{Key: "vcs.modified", Value: "true"}}},
			want: []string{"jetfn v0.0.0-20261201135400-3adadda1b2c3+dirty\n",
				"revision 3adadda1b2c3d4e5 (committed 2026-12-01T13:54:00Z, with uncommitted changes)\n", "go1.26.8 "}},
		{name: "go run", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			want: []string{"jetfn (devel)\n", "revision unknown: built without VCS stamping"}},
		{name: "no build info", info: nil, want: []string{"jetfn (devel)\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describeBuild(tt.info)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("describeBuild:\n%s\nwant it to contain %q", got, w)
				}
			}
		})
	}
}

// TestVersionNamesTheRevision builds jetfn as a user would, with `go tool
// task build` in a git clone, and checks that `jetfn version` names the
// commit, and says so when the tree had changes.
func TestVersionNamesTheRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary in a copy of the module")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := runtimetest.CopyModule(t)
	git := func(args ...string) string {
		return strings.TrimSpace(inDir(t, dir, "git", append([]string{"-c", "user.name=jetfn test", "-c", "user.email=test@jetfn.invalid"}, args...)...))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "the module as it is")
	head := git("rev-parse", "HEAD")

	inDir(t, dir, "go", "tool", "task", "build")
	out := inDir(t, dir, filepath.Join(dir, "bin", "jetfn"), "version")
	t.Logf("clean tree:\n%s", out)
	if !strings.Contains(out, "revision "+head+" (committed ") || strings.Contains(out, "uncommitted") {
		t.Errorf("jetfn version:\n%s\nwant revision %s without uncommitted changes", out, head)
	}

	if err := os.WriteFile(filepath.Join(dir, "cmd", "jetfn", "changed.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inDir(t, dir, "go", "tool", "task", "build")
	out = inDir(t, dir, filepath.Join(dir, "bin", "jetfn"), "version")
	t.Logf("changed tree:\n%s", out)
	if !strings.Contains(out, "revision "+head+" (committed ") || !strings.Contains(out, "with uncommitted changes") {
		t.Errorf("jetfn version:\n%s\nwant revision %s with uncommitted changes", out, head)
	}
}
