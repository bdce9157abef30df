package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/simulate"
)

// cmdSimulate plays a publisher against any stack (NATS_URL, MONGO_URI).
func cmdSimulate(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 || (args[0] != "call" && args[0] != "recording") {
		fmt.Fprintln(errOut, "Usage: jetfn simulate call|recording [flags]")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return usageError(errors.New("simulate needs `call` or `recording`"))
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	if args[0] == "call" {
		return simulateCall(ctx, cfg, args[1:], out, errOut)
	}
	return simulateRecording(ctx, cfg, args[1:], out, errOut)
}

func simulateCall(ctx context.Context, cfg Config, args []string, out, errOut io.Writer) error {
	opts := simulate.DefaultCallOptions()
	fs := newFlags("simulate call", "simulate call [--sessions K] [--segments N] [--late L]", errOut)
	fs.IntVar(&opts.Sessions, "sessions", opts.Sessions, "calls to run at once")
	fs.IntVar(&opts.Segments, "segments", opts.Segments, "segments per call (0 is a silent session)")
	fs.IntVar(&opts.LateSegments, "late", opts.LateSegments, "segments saved after session-ended")
	fs.DurationVar(&opts.LateDelay, "late-delay", opts.LateDelay, "how long after session-ended the late segments are saved")
	fs.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "give up after this: on the whole call, retries of saves and publishes included")
	if err := parseOptions(fs, args, &opts); err != nil {
		return err
	}
	tp, log, stopTracing, err := startTracing(ctx, cfg.newLogger(errOut))
	if err != nil {
		return err
	}
	defer stopTracing()
	opts.Logger, opts.NATS = log, cfg.NATS
	if tp != nil {
		opts.Tracer = tp.TracerProvider().Tracer("github.com/jetfn/jetfn/simulate")
	}
	return withMongo(ctx, cfg, func(db *mongo.Database) error {
		return simulate.Call(ctx, cfg.NATSURL, db, out, opts)
	})
}

// parseOptions parses args into the fields opts' flags are bound to, then
// validates opts: a value out of range is a usage error, like a bad flag.
// opts is a pointer, so Validate sees the parsed values, not a copy taken
// before parsing.
func parseOptions(fs *flag.FlagSet, args []string, opts interface{ Validate() error }) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return usageError(opts.Validate())
}

// stackTimeout bounds how long the commands that play against a stack or
// read its results wait for it: a local `task run` answers at once, or is
// not running.
const stackTimeout = 2 * time.Second

// withMongo checks that the stack at NATS_URL and MONGO_URI answers, then
// connects to MONGO_URI for the length of fn. A stack that is not there is
// one line saying so within stackTimeout, not the driver's topology dump.
func withMongo(ctx context.Context, cfg Config, fn func(*mongo.Database) error) error {
	if cfg.NATSURL == "" || cfg.MongoURI == "" {
		return usageError(errors.New("NATS_URL and MONGO_URI are required (`jetfn dev` prints both)"))
	}
	if err := reachNATS(cfg); err != nil {
		return err
	}
	return withDatabase(ctx, cfg, fn)
}

// withDatabase connects to MONGO_URI alone for the length of fn.
func withDatabase(ctx context.Context, cfg Config, fn func(*mongo.Database) error) error {
	if cfg.MongoURI == "" {
		return usageError(errors.New("MONGO_URI: required (`jetfn dev` prints it)"))
	}
	client, err := connectMongo(ctx, cfg.MongoURI, cfg.MongoCAFile, stackTimeout)
	if errors.Is(err, errMongoUnreachable) {
		return usageError(fmt.Errorf("no MongoDB answered at MONGO_URI %s within %s (%s): %s",
			redactURL(cfg.MongoURI), stackTimeout, mongoCause(err), startStackHint))
	}
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	return fn(client.Database(cfg.MongoDatabase))
}

// startStackHint is what to do when the stack is not there.
const startStackHint = "start `go tool task run` first, in another terminal"

// reachNATS connects to NATS_URL once, with stackTimeout, and closes.
func reachNATS(cfg Config) error {
	authOpts, err := cfg.NATS.Options()
	if err != nil {
		return usageError(err)
	}
	nc, err := nats.Connect(cfg.NATSURL, append(authOpts, nats.Timeout(stackTimeout), nats.Name("jetfn-simulate"))...)
	if err != nil {
		return usageError(fmt.Errorf("no NATS server answered at NATS_URL %s (%v): %s", redactURLs(cfg.NATSURL), err, startStackHint))
	}
	nc.Close()
	return nil
}

// mongoLastError is the cause inside the driver's server selection error,
// which otherwise prints the whole topology.
var mongoLastError = regexp.MustCompile(`Last error: ([^}]*?)\s*}`)

func mongoCause(err error) string {
	if m := mongoLastError.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "context deadline exceeded") {
		return "no answer"
	}
	return err.Error()
}
