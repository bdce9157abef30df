package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jetfn/jetfn/functions"
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
	if *path == "" {
		*path = cfg.Manifest
	}
	if *path == "" {
		return usageError(errors.New("--manifest (or JETFN_MANIFEST) is required"))
	}
	m, err := runtime.LoadManifest(*path)
	if err == nil {
		err = m.Validate(runtime.Names(functions.All()))
	}
	if err != nil {
		fmt.Fprintln(out, err)
		return errCheckFailed
	}
	if err := m.CheckDuplicateWindows(); err != nil {
		if !*allowShort {
			fmt.Fprintln(out, err)
			return errCheckFailed
		}
		fmt.Fprintf(out, "warning (--allow-short-window): %v\n", err)
	}
	fmt.Fprintf(out, "%s: ok (%d streams, %d functions, digest %s)\n", *path, len(m.Streams), len(m.Functions), m.Digest)
	return nil
}
