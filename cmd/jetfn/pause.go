package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/ops/pause"
)

// cmdPause pauses a function on the server: no instance is handed its
// messages until the time, or until `jetfn resume`.
func cmdPause(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("pause", "pause FUNCTION [--until 2026-12-24T18:00:00Z|30m]", errOut)
	until := fs.String("until", "", "when the server resumes the function by itself: an RFC 3339 time or a duration from now (default: until `jetfn resume`)")
	function, cfg, err := parseFunctionArgs(fs, args)
	if err != nil {
		return err
	}
	now := time.Now()
	end, err := pauseEnd(*until, now)
	if err != nil {
		return usageError(err)
	}
	return withJetStream(ctx, cfg, func(js jetstream.JetStream) error {
		consumers, err := pause.Pause(ctx, js, function, end)
		if err != nil {
			return err
		}
		when := "until `jetfn resume " + function + "`"
		if *until != "" {
			when = "until " + end.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(out, "paused %s %s: %s\n", function, when, listConsumers(consumers))
		return nil
	})
}

// cmdResume resumes a paused function on the server now.
func cmdResume(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("resume", "resume FUNCTION", errOut)
	function, cfg, err := parseFunctionArgs(fs, args)
	if err != nil {
		return err
	}
	return withJetStream(ctx, cfg, func(js jetstream.JetStream) error {
		consumers, err := pause.Resume(ctx, js, function)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "resumed %s: %s\n", function, listConsumers(consumers))
		return nil
	})
}

// parseFunctionArgs reads a command's one FUNCTION argument, before or
// after its flags, and the settings.
func parseFunctionArgs(fs *flag.FlagSet, args []string) (string, Config, error) {
	var function string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		function, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", Config{}, err
		}
		return "", Config{}, usageError(err)
	}
	rest := fs.Args()
	if function == "" && len(rest) > 0 {
		function, rest = rest[0], rest[1:]
	}
	if function == "" || len(rest) > 0 {
		return "", Config{}, usageError(errors.New("give exactly one FUNCTION"))
	}
	cfg, err := loadConfig()
	return function, cfg, err
}

// pauseEnd reads --until: an RFC 3339 time or a duration from now; empty
// is a pause until resumed.
func pauseEnd(until string, now time.Time) (time.Time, error) {
	if until == "" {
		return pause.Indefinitely(now), nil
	}
	end, err := time.Parse(time.RFC3339, until)
	if err != nil {
		d, derr := time.ParseDuration(until)
		if derr != nil {
			return time.Time{}, fmt.Errorf("--until %q: want an RFC 3339 time (2026-12-24T18:00:00Z) or a duration (30m)", until)
		}
		end = now.Add(d)
	}
	if !end.After(now) {
		return time.Time{}, fmt.Errorf("--until %s is not in the future", until)
	}
	return end, nil
}

// listConsumers names the consumers a pause or resume changed.
func listConsumers(cs []pause.Consumer) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.String()
	}
	return fmt.Sprintf("%d consumers (%s)", len(cs), strings.Join(names, ", "))
}
