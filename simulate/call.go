package simulate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/natsconn"
	"github.com/jetfn/jetfn/publish"
)

// ErrCallNotProcessed is returned by Call when a session got no
// transcript.processed before the timeout: summarize-session is not
// running, or is failing (see its dead letters and `nats micro stats`).
var ErrCallNotProcessed = errors.New("no transcript.processed before the timeout")

// CallOptions shapes a simulated call. Start from DefaultCallOptions.
type CallOptions struct {
	// Sessions is how many calls run at once, each its own conversation.
	Sessions int
	// Segments is how many segments each session has; zero is a silent
	// session.
	Segments int
	// LateSegments of those are saved after session-ended, LateDelay after
	// it. Keep LateDelay below the function's quiet period for them to
	// be counted.
	LateSegments int
	LateDelay    time.Duration
	// Timeout bounds the whole simulation, retries and waiting included.
	Timeout time.Duration
	// Logger receives the publisher's errors and each retried step; nil
	// discards them.
	Logger *slog.Logger
	// Tracer, when set, starts one span per session; everything the
	// session publishes carries it, so its whole path through jetfn is one
	// trace (see tracing.go).
	Tracer trace.Tracer
	// NATS are the credentials and TLS settings of every connection the
	// simulation makes (the NATS_* variables of the other commands).
	NATS natsconn.Settings
}

// DefaultCallOptions is one call of 12 segments, 2 of them late.
func DefaultCallOptions() CallOptions {
	return CallOptions{Sessions: 1, Segments: 12, LateSegments: 2, LateDelay: 300 * time.Millisecond, Timeout: time.Minute}
}

// Validate reports every invalid option at once.
func (o CallOptions) Validate() error {
	var errs []error
	if o.Sessions < 1 {
		errs = append(errs, fmt.Errorf("sessions: %d is below 1", o.Sessions))
	}
	if o.Segments < 0 {
		errs = append(errs, fmt.Errorf("segments: %d is negative", o.Segments))
	}
	if o.LateSegments < 0 || o.LateSegments > o.Segments {
		errs = append(errs, fmt.Errorf("late segments: %d is not between 0 and segments (%d)", o.LateSegments, o.Segments))
	}
	if o.LateDelay < 0 {
		errs = append(errs, fmt.Errorf("late delay: %s is negative", o.LateDelay))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout: %s is not positive", o.Timeout))
	}
	return errors.Join(errs...)
}

// Call plays the transcriber against the stack at natsURL and db: for each
// session it saves and publishes the scripted segments, publishes
// session-ended, saves the late segments, and waits for transcript.processed.
// A save or publish that fails is retried until the timeout (see retry), so
// a Mongo outage, or NATS restarting under a publish, delays the call
// instead of ending it. (A transcript.processed sent while the
// simulation's own connection is down is missed, and that session then
// times out.)
// One session's summary is printed to out; several sessions print how many
// completed and how long it took. It returns ErrCallNotProcessed if any
// session timed out.
func Call(ctx context.Context, natsURL string, db *mongo.Database, out io.Writer, opts CallOptions) error {
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("simulate call: %w", err)
	}
	if natsURL == "" {
		return fmt.Errorf("simulate call: %w", ErrNoNATS)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	sessions := newCallSessions(opts.Sessions)
	waiter, err := watchProcessed(natsURL, opts.NATS, sessions)
	if err != nil {
		return err
	}
	defer waiter.close()
	client, err := publish.Connect(natsURL, opts.Logger, publish.WithSettings(opts.NATS))
	if err != nil {
		return err
	}
	defer client.Close()
	tr, err := publish.NewTranscriber(client, db)
	if err != nil {
		return err
	}
	start := time.Now()
	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() { errs[i] = playCall(ctx, tr, waiter, s, opts) })
	}
	wg.Wait()
	took := time.Since(start)
	if len(sessions) == 1 {
		if errs[0] != nil {
			return errs[0]
		}
		return printCallSummary(context.WithoutCancel(ctx), out, db, sessions[0])
	}
	return reportCalls(out, errs, waiter.completeCount(), took)
}

// callSession is one simulated session.
type callSession struct {
	conversationID, sessionID string
}

func (s callSession) key() string { return events.SummaryKey(s.conversationID, s.sessionID) }

func newCallSessions(n int) []callSession {
	run := randomHex(4)
	out := make([]callSession, n)
	for i := range out {
		conv := fmt.Sprintf("sim-%s-%d", run, i+1)
		out[i] = callSession{conversationID: conv, sessionID: conv + "-s1"}
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// playCall plays one session and waits for its transcript.processed.
func playCall(ctx context.Context, tr *publish.Transcriber, w *processedWaiter, s callSession, opts CallOptions) (err error) {
	ctx, end := startSession(ctx, opts.Tracer, s)
	defer func() { end(err) }()
	segs := callScript(s, opts.Segments)
	onTime, late := segs[:len(segs)-opts.LateSegments], segs[len(segs)-opts.LateSegments:]
	if err := saveSegments(ctx, tr, onTime, opts.Logger); err != nil {
		return err
	}
	err = retry(ctx, opts.Logger, "session-ended "+s.sessionID, func(ctx context.Context) error {
		return tr.SessionEnded(ctx, s.conversationID, s.sessionID, len(segs))
	})
	if err != nil {
		return err
	}
	if len(late) > 0 {
		select {
		case <-time.After(opts.LateDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := saveSegments(ctx, tr, late, opts.Logger); err != nil {
		return err
	}
	select {
	case <-w.done(s.key()):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("session %s: %w", s.key(), ErrCallNotProcessed)
	}
}

// saveSegments saves and publishes segs in order, each retried through an
// outage (see retry).
func saveSegments(ctx context.Context, tr *publish.Transcriber, segs []events.Segment, log *slog.Logger) error {
	for _, seg := range segs {
		err := retry(ctx, log, "segment "+seg.Key(), func(ctx context.Context) error { return tr.SaveSegment(ctx, seg) })
		if err != nil {
			return err
		}
	}
	return nil
}

// callLines is the built-in conversation; longer sessions go round again.
var callLines = []struct{ speaker, text string }{
	{"Ana", "Morning everyone, can you all hear me?"},
	{"Ben", "Loud and clear."},
	{"Dr. Okafor", "Yes, go ahead."},
	{"Ana", "Great. Today we decide whether the pilot goes live next week."},
	{"Ana", "The clinic has signed off on the consent form, and the devices arrived on Monday."},
	{"Ben", "Did the data export pass the privacy review?"},
	{"Dr. Okafor", "It did, with one change: we drop the postcode field."},
	{"Ben", "Then I can switch the export on tomorrow."},
	{"Ana", "Who trains the nurses on the new app?"},
	{"Dr. Okafor", "I will run two sessions on Thursday and record them for the night shift."},
	{"Ana", "Perfect. Anything else before we wrap up?"},
	{"Ben", "No, that's everything from me."},
}

func callScript(s callSession, n int) []events.Segment {
	segs := make([]events.Segment, n)
	var at int64
	for i := range segs {
		line := callLines[i%len(callLines)]
		dur := int64(len(strings.Fields(line.text))) * 350
		segs[i] = events.Segment{ConversationID: s.conversationID, SessionID: s.sessionID, Index: i,
			Speaker: line.speaker, Text: line.text, StartMs: at, EndMs: at + dur}
		at += dur + 400
	}
	return segs
}

// processedWaiter is one core NATS subscription to transcript.processed
// that wakes the session each message names. The stream drops a duplicate
// publish but core subscribers still see it, so only the first one counts.
type processedWaiter struct {
	nc       *nats.Conn
	mu       sync.Mutex
	waiting  map[string]chan struct{}
	complete int // sessions whose summary had every segment
}

// watchProcessed subscribes before anything is published, so no
// notification can slip past.
func watchProcessed(natsURL string, settings natsconn.Settings, sessions []callSession) (*processedWaiter, error) {
	nc, err := connect(natsURL, settings, "jetfn-simulate")
	if err != nil {
		return nil, err
	}
	w := &processedWaiter{nc: nc, waiting: map[string]chan struct{}{}}
	for _, s := range sessions {
		w.waiting[s.key()] = make(chan struct{})
	}
	if _, err := nc.Subscribe(events.TranscriptProcessedSubject, w.receive); err != nil {
		nc.Close()
		return nil, fmt.Errorf("subscribing to %s: %w", events.TranscriptProcessedSubject, err)
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("subscribing to %s: %w", events.TranscriptProcessedSubject, err)
	}
	return w, nil
}

func (w *processedWaiter) receive(m *nats.Msg) {
	var evt events.TranscriptProcessed
	if json.Unmarshal(m.Data, &evt) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := events.SummaryKey(evt.ConversationID, evt.SessionID)
	if ch, ok := w.waiting[key]; ok {
		close(ch)
		delete(w.waiting, key)
		if evt.Complete {
			w.complete++
		}
	}
}

func (w *processedWaiter) completeCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.complete
}

// done is closed once the session's transcript.processed arrived. Call it
// only for sessions given to watchProcessed.
func (w *processedWaiter) done(key string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.waiting[key]; ok {
		return ch
	}
	closed := make(chan struct{})
	close(closed)
	return closed
}

func (w *processedWaiter) close() { w.nc.Close() }

// reportCalls prints how many of several sessions completed, and how many
// of those had every segment in their summary.
func reportCalls(out io.Writer, errs []error, complete int, took time.Duration) error {
	done := 0
	for _, err := range errs {
		if err == nil {
			done++
		}
	}
	fmt.Fprintf(out, "%d/%d completed in %s (%d with every segment)\n", done, len(errs), took.Round(time.Millisecond), complete)
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("%d of %d sessions failed, first: %w", len(errs)-done, len(errs), err)
		}
	}
	return nil
}

func printCallSummary(ctx context.Context, out io.Writer, db *mongo.Database, s callSession) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var sum events.Summary
	err := db.Collection(events.SummariesCollection).FindOne(ctx, bson.D{{Key: "_id", Value: s.key()}}).Decode(&sum)
	if err != nil {
		return fmt.Errorf("reading summary %s: %w", s.key(), err)
	}
	writeCallSummary(out, sum)
	return nil
}

// writeCallSummary prints a summary for a person to read.
func writeCallSummary(out io.Writer, sum events.Summary) {
	state := "complete"
	if !sum.Complete {
		state = "INCOMPLETE"
	}
	fmt.Fprintf(out, "Session %s (conversation %s): %d of %d segments, %s\n",
		sum.SessionID, sum.ConversationID, sum.Segments, sum.PublishedSegments, state)
	fmt.Fprintln(out, "\nWords per speaker:")
	if len(sum.WordsPerSpeaker) == 0 {
		fmt.Fprintln(out, "  (none)")
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, sp := range speakersByWords(sum.WordsPerSpeaker) {
		fmt.Fprintf(tw, "  %s\t%d\n", displaySpeaker(sp), sum.WordsPerSpeaker[sp])
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "\nLongest turns:")
	if len(sum.LongestTurns) == 0 {
		fmt.Fprintln(out, "  (none)")
	}
	for i, turn := range sum.LongestTurns {
		fmt.Fprintf(out, "  %d. %s (from segment %d): %q\n", i+1, turn.Speaker, turn.FirstIndex, turn.Text)
	}
	fmt.Fprintln(out, "\nQuestions:")
	if len(sum.Questions) == 0 {
		fmt.Fprintln(out, "  (none)")
	}
	for _, q := range sum.Questions {
		fmt.Fprintf(out, "  - %s\n", q)
	}
}

func speakersByWords(words map[string]int) []string {
	names := make([]string, 0, len(words))
	for k := range words {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if words[a] != words[b] {
			return words[b] - words[a]
		}
		return strings.Compare(a, b)
	})
	return names
}

// displaySpeaker undoes events.SpeakerKey for printing.
func displaySpeaker(key string) string {
	name := strings.ReplaceAll(key, "\uff0e", ".")
	if rest, ok := strings.CutPrefix(name, "\uff04"); ok {
		return "$" + rest
	}
	return name
}
