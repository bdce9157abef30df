package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/jetfn/jetfn/console"
	"github.com/jetfn/jetfn/manifest"
)

// deploymentKey is a KV key without wildcards, which would widen the
// generated rights to other deployments.
var deploymentKey = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*$`)

// cmdPermissions prints the NATS permissions a runtime instance needs for a
// manifest, and nothing more.
func cmdPermissions(_ context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("permissions", "permissions --manifest FILE [--provision] [--deployment NAME] [--prune] [--json] [--inbox-prefix _INBOX] [--reply-prefix _INBOX ...]\n       jetfn permissions --console [--actions] --manifest FILE [--deployment default] [--json]", errOut)
	path := fs.String("manifest", "", "manifest (default $JETFN_MANIFEST); with --deployment, one listing every function the deployment will run")
	provision := fs.Bool("provision", false, "add stream and consumer management rights (the runtime creates them; without it run with --no-provision)")
	deployment := fs.String("deployment", "", "add reading and watching this key of the "+manifest.ManifestBucket+" KV bucket (for run --deployment NAME); no right to write it")
	prune := fs.Bool("prune", false, "add deleting each function's durable consumer (for run --prune)")
	asJSON := fs.Bool("json", false, "print JSON instead of a nats-server config block")
	inbox := fs.String("inbox-prefix", manifest.DefaultInboxPrefix, "the instance's own inbox prefix (its NATS_INBOX_PREFIX)")
	var replies []string
	fs.Func("reply-prefix", "an inbox prefix of the clients that query the instance (nats micro, jetfn status, the console); "+
		"its micro services may answer only there; repeat for several (default _INBOX)", func(p string) error {
		replies = append(replies, p)
		return nil
	})
	forConsole := fs.Bool("console", false, "the web console's permissions instead (`jetfn console`): read-only, the manifest's functions and dead letters")
	actions := fs.Bool("actions", false, "with --console: add replaying dead letters and rolling back the deployment")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *actions && !*forConsole {
		return usageError(errors.New("--actions goes with --console"))
	}
	if *forConsole && *deployment == "" {
		*deployment = "default"
	}
	opts := manifest.PermissionOptions{InboxPrefix: *inbox, ReplyPrefixes: replies, Provision: *provision,
		Deployment: *deployment, Prune: *prune}
	if err := opts.Validate(); err != nil {
		return usageError(err)
	}
	if *deployment != "" && !deploymentKey.MatchString(*deployment) {
		return usageError(fmt.Errorf("--deployment %q: a KV key holds letters, digits and -/_= in dot-separated tokens, no wildcards", *deployment))
	}
	_, file, err := manifestFile(*path)
	if err != nil {
		return err
	}
	m, err := manifest.Load(file)
	if err != nil {
		return usageError(err)
	}
	perms := m.Permissions(opts)
	if *forConsole {
		perms = console.Permissions(m, console.PermissionOptions{InboxPrefix: *inbox, Deployment: *deployment, Actions: *actions})
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(perms)
	}
	fmt.Fprint(out, perms.ServerConfig())
	return nil
}
