package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

func cmdVersion(_ context.Context, args []string, out, errOut io.Writer) error {
	if err := parseFlags(newFlags("version", "version", errOut), args); err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprint(out, describeBuild(info))
	return nil
}

// describeBuild says what was built, from what the go command stamped into
// the binary: the module version (a release tag for `go install
// …@v1.2.3`, a pseudo-version for a build in a clone, "(devel)" otherwise)
// and the VCS revision, its time and whether the tree had uncommitted
// changes. `go run` and -buildvcs=false stamp no revision, and neither does
// a build in a git worktree (the go command looks for a .git directory).
func describeBuild(info *debug.BuildInfo) string {
	version, goVersion := "(devel)", runtime.Version()
	vcs := map[string]string{}
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			if strings.HasPrefix(s.Key, "vcs.") {
				vcs[s.Key] = s.Value
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "jetfn %s\n", version)
	if rev := vcs["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "revision %s", rev)
		var notes []string
		if t := vcs["vcs.time"]; t != "" {
			notes = append(notes, "committed "+t)
		}
		if vcs["vcs.modified"] == "true" {
			notes = append(notes, "with uncommitted changes")
		}
		if len(notes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("revision unknown: built without VCS stamping (go run, -buildvcs=false, or outside a git clone); " +
			"`go tool task build` in a clone stamps it\n")
	}
	fmt.Fprintf(&b, "%s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
