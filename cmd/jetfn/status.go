package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/ops/status"
)

// clearScreen moves the cursor home and clears, so --watch redraws in place.
const clearScreen = "\033[H\033[2J"

// cmdStatus prints every running function instance that answers micro
// discovery on NATS_URL.
func cmdStatus(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("status", "status [--watch] [--interval 2s] [--json] [--wait 500ms]", errOut)
	watch := fs.Bool("watch", false, "refresh until Ctrl-C")
	interval := fs.Duration("interval", status.DefaultInterval, "how often --watch refreshes")
	asJSON := fs.Bool("json", false, "print JSON (with --watch: one array per line)")
	wait := fs.Duration("wait", status.DefaultWindow, "how long to collect replies from instances")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *interval <= 0 || *wait <= 0 {
		return usageError(errors.New("--interval and --wait must be positive"))
	}
	nc, err := connectOps(errOut)
	if err != nil {
		return err
	}
	defer nc.Close()
	show := func(ctx context.Context) error {
		instances, err := status.Collect(ctx, nc, *wait)
		if err != nil {
			return err
		}
		if *asJSON {
			return status.WriteJSON(out, instances)
		}
		if *watch {
			fmt.Fprintf(out, "%s%s  (every %s, Ctrl-C to stop)\n\n", clearScreen, time.Now().Format(time.TimeOnly), *interval)
		}
		return status.WriteTable(out, instances, time.Now())
	}
	if *watch {
		return status.Watch(ctx, *interval, show)
	}
	return show(ctx)
}

// connectOps connects the operating commands (status, console) to NATS_URL
// with the same authentication settings as `run`.
func connectOps(errOut io.Writer) (*nats.Conn, error) {
	cfg, err := opsConfig()
	if err != nil {
		return nil, err
	}
	nc, _, err := connectNATS(cfg.NATSURL, cfg.NATS, cfg.newLogger(errOut))
	return nc, err
}

// opsConfig loads the settings of an operating command, which cannot guess
// where the stack is: NATS_URL is required.
func opsConfig() (Config, error) {
	cfg, err := loadConfig()
	if err != nil {
		return Config{}, err
	}
	if cfg.NATSURL == "" {
		return Config{}, usageError(errors.New("NATS_URL: required (`jetfn dev` prints it)"))
	}
	return cfg, nil
}
