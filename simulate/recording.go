package simulate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/natsconn"
	"github.com/jetfn/jetfn/publish"
)

// ErrRecordingNotProcessed is returned by Recording when a notice or the
// recording's final state did not appear before the timeout:
// publish-recording-event is not running, or is failing (see its dead
// letters and `nats micro stats`).
var ErrRecordingNotProcessed = errors.New("recording events not processed before the timeout")

// RecordingOptions shapes a simulated recording. Start from
// DefaultRecordingOptions.
type RecordingOptions struct {
	// NeverStarted plays a recording that is requested and then deleted
	// with reason never-started, instead of the start/stop/delete run.
	NeverStarted bool
	// Timeout bounds the whole simulation, waiting included.
	Timeout time.Duration
	// Logger receives the publisher's errors; nil discards them.
	Logger *slog.Logger
	// NATS are the credentials and TLS settings of every connection the
	// simulation makes (the NATS_* variables of the other commands).
	NATS natsconn.Settings
}

// DefaultRecordingOptions is the start/stop/delete run with a 30s timeout.
func DefaultRecordingOptions() RecordingOptions {
	return RecordingOptions{Timeout: 30 * time.Second}
}

// Validate reports every invalid option at once.
func (o RecordingOptions) Validate() error {
	if o.Timeout <= 0 {
		return fmt.Errorf("timeout: %s is not positive", o.Timeout)
	}
	return nil
}

// Recording plays the backend against the stack at natsURL and db: it
// publishes one recording's events through publish.Backend, as the backend
// does, prints each participant notice as it arrives on
// conversation.<conversationId>.recording, then prints the recording's
// document from db (skipped when db is nil). Each run uses fresh IDs.
func Recording(ctx context.Context, natsURL string, db *mongo.Database, out io.Writer, opts RecordingOptions) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if natsURL == "" {
		return fmt.Errorf("simulate recording: %w", ErrNoNATS)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	script := recordingScript("sim-rec-"+randomHex(4), "sim-conv-"+randomHex(4), time.Now(), opts.NeverStarted)
	notices, stop, err := watchNotices(natsURL, opts.NATS, script[0].ConversationID)
	if err != nil {
		return err
	}
	defer stop()
	if err := playRecording(ctx, natsURL, out, script, opts); err != nil {
		return err
	}
	if err := printNotices(ctx, out, notices, script); err != nil {
		return err
	}
	if db == nil {
		return nil
	}
	return printRecording(ctx, out, db, script)
}

// recordingScript is the backend's sequence for one recording, one second
// apart and ending at end: the seven events of a recording started, stopped,
// stored and deleted, or a request deleted because it never started.
func recordingScript(recordingID, conversationID string, end time.Time, neverStarted bool) []events.RecordingEvent {
	names := []events.RecordingEventName{events.RecordingRequested, events.RecordingConfirmed,
		events.RecordingStarted, events.RecordingStopRequested, events.RecordingStopped,
		events.RecordingStored, events.RecordingDeleted}
	reason := "user-deleted"
	if neverStarted {
		names, reason = []events.RecordingEventName{events.RecordingRequested, events.RecordingDeleted}, "never-started"
	}
	script := make([]events.RecordingEvent, len(names))
	for i, n := range names {
		ago := time.Duration(len(names)-1-i) * time.Second
		script[i] = events.RecordingEvent{TS: end.Add(-ago).UnixMilli(), Event: n,
			RecordingID: recordingID, ConversationID: conversationID,
			Extra: map[string]json.RawMessage{"source": json.RawMessage(`"jetfn simulate recording"`)}}
	}
	script[len(script)-1].Reason = reason
	return script
}

// watchNotices subscribes to the conversation's notices before anything is
// published, so none is missed.
func watchNotices(natsURL string, settings natsconn.Settings, conversationID string) (<-chan *nats.Msg, func(), error) {
	nc, err := connect(natsURL, settings, "jetfn-simulate-recording")
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan *nats.Msg, 64)
	if _, err := nc.ChanSubscribe(events.RecordingNoticeSubject(conversationID), ch); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("subscribing to notices: %w", err)
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("subscribing to notices: %w", err)
	}
	return ch, nc.Close, nil
}

func playRecording(ctx context.Context, natsURL string, out io.Writer, script []events.RecordingEvent, opts RecordingOptions) error {
	client, err := publish.Connect(natsURL, opts.Logger, publish.WithSettings(opts.NATS))
	if err != nil {
		return err
	}
	defer client.Close()
	backend := publish.NewBackend(client)
	fmt.Fprintf(out, "recording %s in conversation %s\n", script[0].RecordingID, script[0].ConversationID)
	for _, ev := range script {
		if err := backend.RecordingEvent(ctx, ev); err != nil {
			return err
		}
		fmt.Fprintf(out, "  published %-30s %s\n", ev.Subject(), ev.MsgID())
	}
	return nil
}

// printNotices waits for a notice of every event of script, then prints
// them in the order the backend published the events. They arrive in
// another order whenever the function handles several events at once, so
// printing them as they came would read as if the recording went
// backwards. On the deadline it prints those that came and fails.
func printNotices(ctx context.Context, out io.Writer, notices <-chan *nats.Msg, script []events.RecordingEvent) error {
	order := make(map[string]int, len(script))
	for i, ev := range script {
		order[ev.MsgID()] = i
	}
	got := make([]*events.RecordingNotice, len(script))
	var err error
	for n := 0; n < len(script) && err == nil; {
		select {
		case m := <-notices:
			var notice events.RecordingNotice
			if uerr := json.Unmarshal(m.Data, &notice); uerr != nil {
				return fmt.Errorf("reading notice %s: %w", m.Data, uerr)
			}
			i, ok := order[events.RecordingMsgID(notice.RecordingID, notice.Event, notice.TS)]
			if ok && got[i] == nil {
				got[i] = &notice
				n++
			}
		case <-ctx.Done():
			err = fmt.Errorf("%w: %d of %d notices arrived", ErrRecordingNotProcessed, n, len(script))
		}
	}
	writeNotices(out, got)
	return err
}

// writeNotices prints the notices that came, in publish order. A notice's
// state is the recording's state when the function handled its event (the
// latest event it had recorded), so with several events handled at once an
// early event's row can show a later state; the note under the table says
// so when it happens.
func writeNotices(out io.Writer, notices []*events.RecordingNotice) {
	fmt.Fprintln(out, "notices, in the order the backend published the events:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  EVENT\tTS\tSTATE\tFAILED\tREASON")
	ahead := false
	for _, n := range notices {
		if n == nil {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%t\t%s\n", n.Event, n.TS, n.State, n.Failed, n.Reason)
		ahead = ahead || n.State != n.Event
	}
	_ = tw.Flush()
	if ahead {
		fmt.Fprintln(out, "  (STATE is the recording's state when the function handled that event; it handles several "+
			"events at once, so a row can already show a later event)")
	}
}

// printRecording waits until the recording document has counted every
// event of the script, then prints it.
func printRecording(ctx context.Context, out io.Writer, db *mongo.Database, script []events.RecordingEvent) error {
	id := script[0].RecordingID
	coll := db.Collection(events.RecordingsCollection)
	var rec events.Recording
	for {
		err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&rec)
		if err == nil && rec.EventCount >= len(script) {
			break
		}
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) && ctx.Err() == nil {
			return fmt.Errorf("reading recording %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: recording %s has counted %d of %d events", ErrRecordingNotProcessed, id, rec.EventCount, len(script))
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "recording %s: state %s, failed %t, %d events, first %s, last %s",
		rec.ID, rec.State, rec.Failed, rec.EventCount,
		time.UnixMilli(rec.FirstTS).UTC().Format(time.RFC3339), time.UnixMilli(rec.LastTS).UTC().Format(time.RFC3339))
	if rec.Reason != "" {
		fmt.Fprintf(out, ", reason %q", rec.Reason)
	}
	fmt.Fprintln(out)
	return nil
}
