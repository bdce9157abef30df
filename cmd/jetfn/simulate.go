package main

import (
	"context"
	"errors"
	"fmt"
	"io"

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
	fs.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "give up waiting for transcript.processed after this")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return usageError(err)
	}
	opts.Logger = cfg.newLogger(errOut)
	return withMongo(ctx, cfg, func(db *mongo.Database) error {
		return simulate.Call(ctx, cfg.NATSURL, db, out, opts)
	})
}

// withMongo connects to MONGO_URI for the length of fn.
func withMongo(ctx context.Context, cfg Config, fn func(*mongo.Database) error) error {
	if cfg.NATSURL == "" || cfg.MongoURI == "" {
		return usageError(errors.New("NATS_URL and MONGO_URI are required (`jetfn dev` prints both)"))
	}
	client, err := connectMongo(ctx, cfg.MongoURI, cfg.MongoCAFile)
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	return fn(client.Database(cfg.MongoDatabase))
}
