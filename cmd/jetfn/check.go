package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/jetfn/jetfn/functions"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/ops/status"
)

func cmdCheck(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("check", "check --manifest FILE [--server NATS_URL]", errOut)
	mf := addManifestFlags(fs, "validate", "report a duplicate window shorter than twice the redelivery horizon as a warning")
	server := fs.String("server", "", "also say, on this NATS server (authenticated by the NATS_* settings), where each "+
		"function's consumer is or would start and how many stored messages that is, and look up each remote function's "+
		"endpoint by micro discovery")
	wait := fs.Duration("wait", status.DefaultWindow, "with --server: how long to collect answers from micro services")
	cfg, _, m, err := parseManifest(fs, args, mf, out)
	if err != nil {
		return err
	}
	if *server != "" {
		if err := checkConsumers(ctx, m, *server, cfg, out, errOut); err != nil {
			return err
		}
		if err := checkRemotes(ctx, m, *server, cfg, *wait, out, errOut); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s: ok (%d streams, %d functions, digest %s)\n", m.File(), len(m.Streams), len(m.Functions), m.Digest)
	return nil
}

// manifestFlags are the flags of the commands that read a manifest file and
// refuse a short duplicate window unless told: check, deploy and run.
type manifestFlags struct {
	path       *string
	allowShort *bool
}

// addManifestFlags adds --manifest and --allow-short-window. What a short
// window is allowed to do differs by command (a warning, a stored revision,
// a running instance), so each command words that flag's usage.
func addManifestFlags(fs *flag.FlagSet, verb, allowShortUsage string) manifestFlags {
	return manifestFlags{
		path:       fs.String("manifest", "", "manifest to "+verb+" (default $JETFN_MANIFEST)"),
		allowShort: fs.Bool("allow-short-window", false, allowShortUsage),
	}
}

// parseManifest parses args, then loads the settings and reads the manifest
// mf names (manifestFile, then readManifest): its bytes, and the manifest,
// whose File is its path.
func parseManifest(fs *flag.FlagSet, args []string, mf manifestFlags, out io.Writer) (Config, []byte, *manifest.Manifest, error) {
	if err := parseFlags(fs, args); err != nil {
		return Config{}, nil, nil, err
	}
	cfg, file, err := manifestFile(*mf.path)
	if err != nil {
		return Config{}, nil, nil, err
	}
	raw, m, err := readManifest(file, *mf.allowShort, out)
	return cfg, raw, m, err
}

// manifestFile loads the settings and names the manifest a command reads:
// the --manifest flag's value, or JETFN_MANIFEST.
func manifestFile(flagValue string) (Config, string, error) {
	cfg, err := loadConfig()
	if err != nil {
		return Config{}, "", err
	}
	switch {
	case flagValue != "":
		return cfg, flagValue, nil
	case cfg.Manifest != "":
		return cfg, cfg.Manifest, nil
	}
	return Config{}, "", usageError(errors.New("--manifest (or JETFN_MANIFEST) is required"))
}

// readManifest reads a manifest and runs every check that needs no server
// in one round (manifest.Inspect: its keys and values, its rules against
// this binary's functions, their config blocks and the duplicate windows),
// printing every problem to out as file:line: … in line order
// (errCheckFailed). With allowShort a short window is printed as a warning.
func readManifest(path string, allowShort bool, out io.Writer) ([]byte, *manifest.Manifest, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, usageError(err)
	}
	m, report := manifest.Inspect(path, raw, functions.All())
	refused := report.Problems
	if !allowShort {
		refused = append(refused, report.ShortWindows...)
		slices.SortStableFunc(refused, func(a, b *manifest.Problem) int { return cmp.Compare(a.Line, b.Line) })
	}
	for _, p := range refused {
		fmt.Fprintln(out, p)
	}
	if allowShort {
		for _, p := range report.ShortWindows {
			fmt.Fprintf(out, "warning (--allow-short-window): %v\n", p)
		}
	}
	for _, w := range report.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	if len(refused) > 0 {
		fmt.Fprintf(out, "%s: %s\n", path, plural(len(refused), "problem"))
		return nil, nil, errCheckFailed
	}
	return raw, m, nil
}

// plural is "1 problem" or "3 problems".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
