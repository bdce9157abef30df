package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jetfn/jetfn/functions"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
)

func cmdCheck(_ context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("check", "check --manifest FILE", errOut)
	path := fs.String("manifest", "", "manifest to validate (default $JETFN_MANIFEST)")
	allowShort := fs.Bool("allow-short-window", false, "report a duplicate window shorter than twice the redelivery horizon as a warning")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	file, err := manifestPath(*path, cfg)
	if err != nil {
		return err
	}
	_, m, err := readManifest(file, *allowShort, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: ok (%d streams, %d functions, digest %s)\n", file, len(m.Streams), len(m.Functions), m.Digest)
	return nil
}

// manifestPath is the --manifest flag's value, or JETFN_MANIFEST.
func manifestPath(flagValue string, cfg Config) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if cfg.Manifest != "" {
		return cfg.Manifest, nil
	}
	return "", usageError(errors.New("--manifest (or JETFN_MANIFEST) is required"))
}

// readManifest reads a manifest and validates it against this binary's
// functions (their names and their config blocks) and the duplicate-window
// rule, printing every problem to out (errCheckFailed). With allowShort a
// short window is printed as a warning.
func readManifest(path string, allowShort bool, out io.Writer) ([]byte, *manifest.Manifest, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, usageError(err)
	}
	m, err := manifest.Parse(raw)
	if err == nil {
		err = validate(m)
	}
	if err != nil {
		fmt.Fprintln(out, err)
		return nil, nil, errCheckFailed
	}
	if err := m.CheckDuplicateWindows(); err != nil {
		if !allowShort {
			fmt.Fprintln(out, err)
			return nil, nil, errCheckFailed
		}
		fmt.Fprintf(out, "warning (--allow-short-window): %v\n", err)
	}
	for _, w := range m.OutputStreamWarnings() {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	return raw, m, nil
}

// validate runs the manifest's own rules and every function's config check
// in one go, so one run lists every problem; neither touches a server.
func validate(m *manifest.Manifest) error {
	all := functions.All()
	return errors.Join(m.Validate(runtime.Names(all)), manifest.CheckConfigs(m, all))
}
