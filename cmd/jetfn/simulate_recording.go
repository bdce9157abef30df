package main

import (
	"context"
	"io"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/simulate"
)

// simulateRecording plays the backend's recording events against a stack
// and prints the recording's state and the participant notices.
func simulateRecording(ctx context.Context, cfg Config, args []string, out, errOut io.Writer) error {
	opts := simulate.DefaultRecordingOptions()
	fs := newFlags("simulate recording", "simulate recording [--never-started]", errOut)
	fs.BoolVar(&opts.NeverStarted, "never-started", opts.NeverStarted, "a recording requested, then deleted with reason never-started")
	fs.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "give up waiting for the notices after this")
	if err := parseOptions(fs, args, &opts); err != nil {
		return err
	}
	opts.Logger, opts.NATS = cfg.newLogger(errOut), cfg.NATS
	return withMongo(ctx, cfg, func(db *mongo.Database) error {
		return simulate.Recording(ctx, cfg.NATSURL, db, out, opts)
	})
}
