package simulate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/events"
)

// ErrNoSummary is returned by Summaries for a session that has no stored
// summary.
var ErrNoSummary = errors.New("no summary for that session")

// SummariesOptions says which stored summaries Summaries prints.
type SummariesOptions struct {
	// Limit is how many, most recently updated first; 0 prints them all.
	Limit int
	// Session prints only that session's summary, in full.
	Session string
	// JSON prints the documents as stored, one JSON object per line.
	JSON bool
}

// Summaries prints what summarize-session stored in db, so a user can see
// the results without a Mongo client: one line per session, newest first,
// or one session's summary in full as `simulate call` prints it.
func Summaries(ctx context.Context, db *mongo.Database, out io.Writer, opts SummariesOptions) error {
	if opts.Limit < 0 {
		return fmt.Errorf("limit: %d is negative", opts.Limit)
	}
	coll := db.Collection(events.SummariesCollection)
	if opts.Session != "" {
		return printSession(ctx, coll, out, opts)
	}
	find := options.Find().SetSort(bson.D{{Key: "updatedAt", Value: -1}, {Key: "_id", Value: 1}})
	if opts.Limit > 0 {
		find.SetLimit(int64(opts.Limit))
	}
	cur, err := coll.Find(ctx, bson.D{}, find)
	if err != nil {
		return fmt.Errorf("reading summaries: %w", err)
	}
	var sums []events.Summary
	if err := cur.All(ctx, &sums); err != nil {
		return fmt.Errorf("reading summaries: %w", err)
	}
	if opts.JSON {
		return writeJSONLines(out, sums)
	}
	writeSummaryTable(out, sums)
	return nil
}

func printSession(ctx context.Context, coll *mongo.Collection, out io.Writer, opts SummariesOptions) error {
	var sum events.Summary
	err := coll.FindOne(ctx, bson.D{{Key: "sessionId", Value: opts.Session}}).Decode(&sum)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("session %s: %w", opts.Session, ErrNoSummary)
	}
	if err != nil {
		return fmt.Errorf("reading summary of session %s: %w", opts.Session, err)
	}
	if opts.JSON {
		return writeJSONLines(out, []events.Summary{sum})
	}
	writeCallSummary(out, sum)
	return nil
}

func writeJSONLines(out io.Writer, sums []events.Summary) error {
	enc := json.NewEncoder(out)
	for _, s := range sums {
		if err := enc.Encode(s); err != nil {
			return fmt.Errorf("writing summary %s: %w", s.ID, err)
		}
	}
	return nil
}

// writeSummaryTable prints one line per summary.
func writeSummaryTable(out io.Writer, sums []events.Summary) {
	if len(sums) == 0 {
		fmt.Fprintf(out, "no summaries stored yet (collection %s); `go tool task demo` makes one\n", events.SummariesCollection)
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "UPDATED\tSESSION\tCONVERSATION\tSEGMENTS\tSTATE\tSPEAKERS")
	for _, s := range sums {
		state := "complete"
		if !s.Complete {
			state = "INCOMPLETE"
		}
		speakers := speakersByWords(s.WordsPerSpeaker)
		for i, sp := range speakers {
			speakers[i] = displaySpeaker(sp)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d of %d\t%s\t%s\n", s.UpdatedAt.Local().Format(time.DateTime),
			s.SessionID, s.ConversationID, s.Segments, s.PublishedSegments, state, strings.Join(speakers, ", "))
	}
}
