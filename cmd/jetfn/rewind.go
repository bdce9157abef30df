package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/ops/rewind"
)

// confirmInput is where rewind reads its confirmation; tests replace it.
var confirmInput io.Reader = os.Stdin

// cmdRewind moves a function's durable consumer back (or forward) to a
// stream sequence or time, after saying what that means.
func cmdRewind(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("rewind", "rewind FUNCTION --to SEQ|TIME [--dry-run] [--yes] [--manifest F]", errOut)
	path := fs.String("manifest", "", "the manifest that declares the function (default $JETFN_MANIFEST)")
	to := fs.String("to", "", "the stream sequence to deliver next, or an RFC 3339 time: the first message stored at or after it")
	dryRun := fs.Bool("dry-run", false, "only say how many messages that is, and how many fall outside the outputs' duplicate window")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	function, _, err := parseFunctionArgs(fs, args)
	if err != nil {
		return err
	}
	target, err := parseRewindTarget(*to)
	if err != nil {
		return usageError(err)
	}
	cfg, file, err := manifestFile(*path)
	if err != nil {
		return err
	}
	// Read, not checked against this binary's functions: the rewind is
	// the server's consumer's, whoever runs the function.
	m, err := manifest.Load(file)
	if err != nil {
		return usageError(err)
	}
	f, ok := m.Function(function)
	if !ok {
		return fmt.Errorf("%s has no function %s", m.File(), function)
	}
	return withJetStream(ctx, cfg, func(js jetstream.JetStream) error {
		p, err := rewind.MakePlan(ctx, js, m, f, target, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintln(out, describeRewind(p))
		if *dryRun {
			return nil
		}
		if !*yes && !confirm(out, "rewind "+function+"?") {
			return errors.New("not rewound: not confirmed (--yes skips the question)")
		}
		if err := rewind.Apply(ctx, js, p); err != nil {
			return err
		}
		fmt.Fprintf(out, "rewound %s: consumer %s delivers stream sequence %d next\n", function, p.Consumer, p.To)
		return nil
	})
}

// parseRewindTarget reads --to: a stream sequence or an RFC 3339 time.
func parseRewindTarget(to string) (rewind.Target, error) {
	if seq, err := strconv.ParseUint(to, 10, 64); err == nil && seq > 0 {
		return rewind.Target{Seq: seq}, nil
	}
	if t, err := time.Parse(time.RFC3339, to); err == nil {
		return rewind.Target{Time: t}, nil
	}
	return rewind.Target{}, fmt.Errorf("--to %q: want a stream sequence (from 1) or an RFC 3339 time (2026-12-24T18:00:00Z)", to)
}

// describeRewind says what a rewind does, in one line.
func describeRewind(p rewind.Plan) string {
	line := fmt.Sprintf("%s: consumer %s on %s would deliver stream sequence %d next", p.Function, p.Consumer, p.Stream, p.To)
	switch {
	case p.Skipped() > 0:
		return line + fmt.Sprintf(": %d messages not yet handled are skipped, never handled", p.Skipped())
	case p.Again() == 0:
		return line + ": no message is handled again"
	case p.Window == 0:
		return line + fmt.Sprintf(": %d messages are handled again (the function has no outputs)", p.Again())
	}
	return line + fmt.Sprintf(": %d messages are handled again; %d of them were stored more than %s ago, outside the outputs' "+
		"duplicate window, so their outputs would be published again", p.Again(), p.Outside, p.Window)
}

// confirm asks question and reads a yes.
func confirm(out io.Writer, question string) bool {
	fmt.Fprintf(out, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(confirmInput).ReadString('\n')
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}
