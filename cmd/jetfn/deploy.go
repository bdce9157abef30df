package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/deploy"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
)

// cmdDeploy validates a manifest, shows what it changes against the
// deployment's current revision and the server, and with --yes stores it as
// the new revision; instances running with --deployment apply it live.
func cmdDeploy(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("deploy", "deploy --manifest FILE [--deployment NAME] [--yes]", errOut)
	mf := addManifestFlags(fs, "deploy", "accept a duplicate window shorter than twice the redelivery horizon")
	name := fs.String("deployment", "default", "deployment name (the KV key)")
	yes := fs.Bool("yes", false, "store the revision; without it only the plan is shown")
	cfg, raw, m, err := parseManifest(fs, args, mf, out)
	if err != nil {
		return err
	}
	if err := m.CheckDuplicateWindows(); err != nil {
		fmt.Fprintf(out, "%s: a deployment's revision is applied by every instance, each with its own flags: one started "+
			"without --allow-short-window would refuse this revision. Put `allowShortWindow: true` in the manifest to accept "+
			"the short window for every instance\n", m.File())
		return errCheckFailed
	}
	return withJetStream(ctx, cfg, func(js jetstream.JetStream) error {
		var current *manifest.Manifest
		if rev, err := deploy.Load(ctx, js, *name); err == nil {
			if current, err = rev.Manifest(); err != nil {
				current = nil
			}
			fmt.Fprintf(out, "deployment %s: revision %d is live\n", *name, rev.Number)
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		fmt.Fprint(out, manifest.PlanChange(current, m).String())
		refusals, err := runtime.ServerRefusals(ctx, js, m)
		if err != nil {
			return err
		}
		for _, r := range refusals {
			fmt.Fprintf(out, "! %s\n", r)
		}
		if len(refusals) > 0 {
			return errCheckFailed
		}
		if !*yes {
			fmt.Fprintln(out, "(plan only: add --yes to store it)")
			return nil
		}
		rev, err := deploy.Store(ctx, js, *name, raw)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "stored as revision %d of deployment %s\n", rev, *name)
		return nil
	})
}

func cmdRollback(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("rollback", "rollback [--deployment NAME]", errOut)
	name := fs.String("deployment", "default", "deployment name (the KV key)")
	cfg, err := parseConfig(fs, args)
	if err != nil {
		return err
	}
	return withJetStream(ctx, cfg, func(js jetstream.JetStream) error {
		from, to, err := deploy.Rollback(ctx, js, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "deployment %s: revision %d restores the manifest of the revision before %d\n", *name, to.Number, from.Number)
		return nil
	})
}

// withJetStream connects to NATS_URL for the length of fn.
func withJetStream(ctx context.Context, cfg Config, fn func(jetstream.JetStream) error) error {
	if cfg.NATSURL == "" {
		return usageError(errors.New("NATS_URL: required"))
	}
	return withJetStreamAt(cfg.NATSURL, cfg.NATS, cfg.newLogger(io.Discard), fn)
}
