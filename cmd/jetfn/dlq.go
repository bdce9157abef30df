package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/ops/dlq"
)

// defaultDLQManifest is where `jetfn dlq` looks for the dead-letter stream
// when neither --manifest nor JETFN_MANIFEST names a manifest.
const defaultDLQManifest = "manifests/local.yaml"

const dlqUsage = "Usage: jetfn dlq ls [--function F] [--json]\n" +
	"       jetfn dlq show SEQ [--json]\n" +
	"       jetfn dlq replay SEQ|--function F|--all [--since T] [--until T] [--error TEXT] [--dry-run] [--force]"

// cmdDLQ lists, shows and replays dead letters.
func cmdDLQ(ctx context.Context, args []string, out, errOut io.Writer) error {
	sub := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"ls": dlqList, "show": dlqShow, "replay": dlqReplay,
	}
	if len(args) == 0 || sub[args[0]] == nil {
		fmt.Fprintln(errOut, dlqUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return usageError(errors.New("dlq needs `ls`, `show` or `replay`"))
	}
	return sub[args[0]](ctx, args[1:], out, errOut)
}

func dlqList(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("dlq ls", "dlq ls [--function F] [--json] [--manifest FILE]", errOut)
	function := fs.String("function", "", "only this function's dead letters")
	asJSON := fs.Bool("json", false, "print JSON")
	manifest := deadLetterManifestFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withDLQ(ctx, *manifest, errOut, func(store *dlq.Store) error {
		letters, err := store.List(ctx, *function)
		if err != nil {
			return err
		}
		if *asJSON {
			return dlq.WriteJSON(out, nonNil(letters))
		}
		return dlq.WriteList(out, letters, time.Now())
	})
}

func dlqShow(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("dlq show", "dlq show SEQ [--json] [--manifest FILE]", errOut)
	asJSON := fs.Bool("json", false, "print JSON (the payload base64-encoded)")
	manifest := deadLetterManifestFlag(fs)
	seqs, err := parseWithArgs(fs, args)
	if err != nil {
		return err
	}
	if len(seqs) != 1 {
		return usageError(errors.New("dlq show needs one SEQ"))
	}
	return withDLQ(ctx, *manifest, errOut, func(store *dlq.Store) error {
		l, err := store.Get(ctx, seqs[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return dlq.WriteJSON(out, l)
		}
		return dlq.WriteLetter(out, l)
	})
}

func dlqReplay(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("dlq replay", "dlq replay SEQ|--function F|--all [--since T] [--until T] [--error TEXT] [--dry-run] [--force] [--manifest FILE]", errOut)
	function := fs.String("function", "", "replay every dead letter of this function")
	all := fs.Bool("all", false, "replay every dead letter")
	since := fs.String("since", "", "with --function or --all: only those stored from this RFC 3339 time, or this long ago (2h)")
	until := fs.String("until", "", "with --function or --all: only those stored before this RFC 3339 time, or this long ago")
	errorText := fs.String("error", "", "with --function or --all: only those whose error contains this text (any case)")
	var opts dlq.ReplayOptions
	fs.BoolVar(&opts.DryRun, "dry-run", false, "print what would be replayed and change nothing")
	fs.BoolVar(&opts.Force, "force", false, "replay a dead letter again that was already replayed")
	manifest := deadLetterManifestFlag(fs)
	seqs, err := parseWithArgs(fs, args)
	if err != nil {
		return err
	}
	chosen := 0
	for _, set := range []bool{len(seqs) > 0, *function != "", *all} {
		if set {
			chosen++
		}
	}
	if chosen != 1 || len(seqs) > 1 {
		return usageError(errors.New("dlq replay needs exactly one of SEQ, --function F or --all"))
	}
	sel, err := replaySelection(*function, *since, *until, *errorText, time.Now())
	if err != nil {
		return usageError(err)
	}
	if len(seqs) == 1 && sel != (dlq.Selection{}) {
		return usageError(errors.New("--since, --until and --error select among --function F or --all, not a SEQ"))
	}
	return withDLQ(ctx, *manifest, errOut, func(store *dlq.Store) error {
		if len(seqs) == 1 {
			r, err := store.Replay(ctx, seqs[0], opts)
			if err != nil {
				return err
			}
			dlq.WriteReplay(out, r, nil)
			return nil
		}
		opts.Progress = replayProgress(errOut)
		failed, err := store.ReplayAll(ctx, sel, opts, func(r dlq.Replay, err error) { dlq.WriteReplay(out, r, err) })
		if err != nil {
			return err
		}
		if failed > 0 {
			return fmt.Errorf("%d dead letters not replayed", failed)
		}
		return nil
	})
}

// replaySelection reads a bulk replay's filters; a time is RFC 3339 or a
// duration before now.
func replaySelection(function, since, until, errorText string, now time.Time) (dlq.Selection, error) {
	sel := dlq.Selection{Function: function, ErrorContains: errorText}
	for _, t := range []struct {
		flag, value string
		into        *time.Time
	}{{"--since", since, &sel.Since}, {"--until", until, &sel.Until}} {
		if t.value == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, t.value)
		if err != nil {
			ago, derr := time.ParseDuration(t.value)
			if derr != nil || ago < 0 {
				return sel, fmt.Errorf("%s %q: want an RFC 3339 time (2026-12-24T18:00:00Z) or how long ago (2h)", t.flag, t.value)
			}
			at = now.Add(-ago)
		}
		*t.into = at
	}
	if !sel.Since.IsZero() && !sel.Until.IsZero() && !sel.Since.Before(sel.Until) {
		return sel, fmt.Errorf("--since %s is not before --until %s: the range selects nothing",
			sel.Since.Format(time.RFC3339), sel.Until.Format(time.RFC3339))
	}
	return sel, nil
}

// replayProgress prints a bulk replay's progress line to w: every hundred
// dead letters, and at the end.
func replayProgress(w io.Writer) func(done, total, failed int) {
	return func(done, total, failed int) {
		if done%100 == 0 || done == total {
			fmt.Fprintf(w, "dlq replay: %d of %d done, %d not replayed\n", done, total, failed)
		}
	}
}

// deadLetterManifestFlag is the --manifest of the commands that only need
// the dead-letter stream's name, so they can fall back to a default.
func deadLetterManifestFlag(fs *flag.FlagSet) *string {
	return fs.String("manifest", "", "manifest naming the dead-letter stream (default $JETFN_MANIFEST, else "+defaultDLQManifest+" if present, else DEADLETTER)")
}

// withDLQ connects and opens the dead-letter stream the manifest names.
func withDLQ(ctx context.Context, manifest string, errOut io.Writer, fn func(*dlq.Store) error) error {
	spec, err := deadLetterSpec(manifest)
	if err != nil {
		return err
	}
	cfg, err := opsConfig()
	if err != nil {
		return err
	}
	return withJetStreamAt(cfg.NATSURL, cfg.NATS, cfg.newLogger(errOut), func(js jetstream.JetStream) error {
		store, err := dlq.Open(ctx, js, spec)
		if err != nil {
			return err
		}
		return fn(store)
	})
}

// deadLetterSpec reads the dead-letter settings from --manifest, else
// JETFN_MANIFEST, else the local manifest if it exists, else the defaults.
func deadLetterSpec(path string) (manifest.DeadLetterSpec, error) {
	defaults := manifest.DeadLetterSpec{Stream: manifest.DefaultDeadLetter, SubjectPrefix: manifest.DefaultDeadPrefix}
	cfg, err := loadConfig()
	if err != nil {
		return defaults, err
	}
	if path == "" {
		path = cfg.Manifest
	}
	if path == "" {
		if _, err := os.Stat(defaultDLQManifest); errors.Is(err, os.ErrNotExist) {
			return defaults, nil
		}
		path = defaultDLQManifest
	}
	m, err := manifest.Load(path)
	if err != nil {
		return defaults, usageError(err)
	}
	return m.DeadLetter, nil
}

// parseWithArgs parses flags that may come before or after the positional
// sequence numbers (`replay 5 --dry-run`), which flag.Parse alone stops at.
func parseWithArgs(fs *flag.FlagSet, args []string) ([]uint64, error) {
	var seqs []uint64
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError(err)
		}
		if fs.NArg() == 0 {
			return seqs, nil
		}
		seq, err := strconv.ParseUint(fs.Arg(0), 10, 64)
		if err != nil || seq == 0 {
			return nil, usageError(fmt.Errorf("%q is not a dead-letter sequence number", fs.Arg(0)))
		}
		seqs = append(seqs, seq)
		args = fs.Args()[1:]
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
