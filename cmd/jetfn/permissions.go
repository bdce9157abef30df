package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/jetfn/jetfn/runtime"
)

// cmdPermissions prints the NATS permissions a runtime instance needs for a
// manifest, and nothing more.
func cmdPermissions(_ context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("permissions", "permissions --manifest FILE [--provision] [--json] [--inbox-prefix _INBOX]", errOut)
	path := fs.String("manifest", "", "manifest (default $JETFN_MANIFEST)")
	provision := fs.Bool("provision", false, "add stream and consumer management rights (the runtime creates them; without it run with --no-provision)")
	asJSON := fs.Bool("json", false, "print JSON instead of a nats-server config block")
	inbox := fs.String("inbox-prefix", "_INBOX", "the connection's inbox prefix")
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
	m, err := runtime.LoadManifest(file)
	if err != nil {
		return usageError(err)
	}
	perms := m.Permissions(runtime.PermissionOptions{InboxPrefix: *inbox, Provision: *provision})
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(perms)
	}
	fmt.Fprint(out, perms.ServerConfig())
	return nil
}
