// Command jetfn runs functions on NATS JetStream. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand of jetfn.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, out, errOut io.Writer) error
}

func commands() []command {
	return []command{
		{"run", "run the manifest's functions against NATS_URL and MONGO_URI", cmdRun},
		{"dev", "run embedded NATS and MongoDB-compatible servers plus the runtime, for local work", cmdDev},
		{"check", "validate a manifest against this binary's functions", cmdCheck},
		{"permissions", "print the NATS permissions a runtime instance needs for a manifest", cmdPermissions},
		{"deploy", "show a manifest's plan and store it as a deployment's new revision (--yes)", cmdDeploy},
		{"rollback", "restore a deployment's previous revision", cmdRollback},
		{"pause", "pause a function on the server, every instance at once, until a time or `jetfn resume`", cmdPause},
		{"resume", "resume a paused function", cmdResume},
		{"rewind", "move a function's consumer back (or forward) to a stream sequence or time, saying first what is handled again", cmdRewind},
		{"status", "show every running function instance: counters, pending, last error (--watch, --json)", cmdStatus},
		{"dlq", "list, show and replay dead letters: `dlq ls`, `dlq show SEQ`, `dlq replay SEQ|--function F|--all`", cmdDLQ},
		{"console", "serve the web console against NATS_URL: functions, runs, dead letters, deploys (read-only without a token)", cmdConsole},
		{"simulate", "play a publisher against a stack: `simulate call` or `simulate recording`", cmdSimulate},
		{"summaries", "list the summaries summarize-session stored on MONGO_URI (--session ID for one in full)", cmdSummaries},
		{"version", "print the module version and the VCS revision it was built from", cmdVersion},
	}
}

// errCheckFailed is a command that ran and found problems: exit code 1.
var errCheckFailed = errors.New("check failed")

// errMongoUnreachable is MONGO_URI parsed but no server answered the ping.
var errMongoUnreachable = errors.New("reaching MongoDB")

// errNegativeLimit is a --limit below 0.
var errNegativeLimit = errors.New("--limit must not be negative")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// realMain runs one command and maps its error to an exit code: 0 on
// success, 2 for a bad flag or setting, 1 for anything else.
func realMain(ctx context.Context, args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(errOut)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], out, errOut)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(errOut, "jetfn %s: %v\n", c.name, err)
			return 2
		case errors.Is(err, errCheckFailed):
			return 1
		default:
			fmt.Fprintf(errOut, "jetfn %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(errOut, "jetfn: unknown command %q\n\n", args[0])
	usage(errOut)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "jetfn runs functions on NATS JetStream.\n\nUsage: jetfn <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `jetfn <command> --help` for a command's flags.")
}

// newFlags makes a command's flag set; errors are returned, not printed and
// exited on, so realMain picks the exit code.
func newFlags(name, synopsis string, errOut io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintf(errOut, "Usage: jetfn %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; a bad flag is a usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError(err)
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	return nil
}

// parseConfig parses args, then loads the settings from the environment:
// a bad flag is reported before a bad variable, and --help needs neither.
func parseConfig(fs *flag.FlagSet, args []string) (Config, error) {
	if err := parseFlags(fs, args); err != nil {
		return Config{}, err
	}
	return loadConfig()
}
