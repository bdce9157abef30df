package main

import (
	"context"
	"io"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/simulate"
)

// cmdSummaries lists what summarize-session stored on MONGO_URI.
func cmdSummaries(ctx context.Context, args []string, out, errOut io.Writer) error {
	var opts simulate.SummariesOptions
	fs := newFlags("summaries", "summaries [--limit 20] [--session ID] [--json]", errOut)
	fs.IntVar(&opts.Limit, "limit", 20, "how many, most recently updated first (0: all)")
	fs.StringVar(&opts.Session, "session", "", "print this session's summary in full")
	fs.BoolVar(&opts.JSON, "json", false, "print the stored documents, one JSON object per line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if opts.Limit < 0 {
		return usageError(errNegativeLimit)
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	return withDatabase(ctx, cfg, func(db *mongo.Database) error {
		return simulate.Summaries(ctx, db, out, opts)
	})
}
