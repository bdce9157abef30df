package jetfn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Handler handles one message of a function's stream.
//
// Its return value decides what the runtime tells JetStream, and it does so
// only after Handle has returned, so a handler's side effects have committed
// before the message is acknowledged:
//   - nil: Ack.
//   - an error wrapped by Malformed or Permanent: the message is republished
//     to the dead-letter stream with the error as its reason, then Term'd.
//     It is never retried.
//   - an error made by RetryAfter: NakWithDelay with the handler's delay,
//     at most the manifest's maxRetryAfter.
//   - any other error, a panic, or a run past the manifest's timeout:
//     NakWithDelay with the manifest's backoff entry for this attempt; on
//     the last allowed delivery (maxDeliver) the message is dead-lettered
//     and Term'd instead. A delivery past maxDeliver (the last one died
//     with its process) is dead-lettered without calling Handle.
//
// JetStream delivers at least once, so Handle must be idempotent: it may run
// again for a message whose effects already happened.
//
// ctx ends at the manifest's timeout, when a drain gives up on the handler,
// and when Handle returns, as an HTTP request's context does: the message
// is settled then, so work left running after it is not covered by the
// ack, and must not keep using ctx.
//
// A Handler that holds something to release (a connection, a file, a
// background goroutine) implements Closer as well.
type Handler interface {
	Handle(ctx context.Context, msg Msg) error
}

// Closer is implemented by a Handler that must release what its
// constructor opened. A handler's life is:
//
//  1. the function's Constructor builds it, once per binding, before any
//     message is taken (at start, and for each function a live deploy adds
//     or changes);
//  2. Handle runs for each delivery, concurrently up to the manifest's
//     concurrency;
//  3. the binding drains (shutdown, a live deploy that changes or removes
//     the function, or one refused after the handler was built): no new
//     delivery starts, and in-flight ones finish or reach the drain
//     timeout;
//  4. Close runs once, with a context that ends after 10 seconds. A
//     handler still running when the drain timeout passed, or abandoned
//     past the function's timeout, may still be running then. Its error is
//     logged; nothing is retried. A Close that ignores its context is left
//     running after the 10 seconds, so a shutdown takes at most the drain
//     timeout plus 10 seconds.
//
// A changed function's new handler is built and starts handling before the
// old one drains and closes, so two handlers of one function may be open at
// once: what they share must allow that.
type Closer interface {
	Close(ctx context.Context) error
}

// HandlerFunc adapts a plain function to Handler.
type HandlerFunc func(ctx context.Context, msg Msg) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, msg Msg) error { return f(ctx, msg) }

// Msg is one delivery of a stream message, as a handler sees it.
type Msg struct {
	Subject string
	Data    []byte
	Header  Header
	// Stream and StreamSequence identify the stored message; they stay the
	// same across redeliveries.
	Stream         string
	StreamSequence uint64
	// StreamIdentity names this incarnation of the stream (a hash of its
	// creation time, as nats-server computes one): a stream deleted and
	// created again restarts its sequences at 1. Empty when unknown.
	StreamIdentity string
	// NumDelivered is 1 on the first delivery and grows with each redelivery.
	NumDelivered uint64
	// Published is when the stream stored the message.
	Published time.Time
}

// Header holds a message's NATS headers. It has nats.Header's shape, so the
// runtime converts one to the other for free, and functions need not import
// nats.go to read a header.
type Header map[string][]string

// Get is the first value of key, or "" when there is none. Keys are exact,
// as NATS headers are.
func (h Header) Get(key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Values is every value of key.
func (h Header) Values(key string) []string { return h[key] }

// Publisher publishes to JetStream and waits for the stream's
// acknowledgement. key is the output's deduplication key: the Publisher a
// function gets sends it as Nats-Msg-Id scoped to the function and subject
// (OutputMsgID), and the stream drops a second publish with the same
// ID inside its duplicate window, which is what makes a handler's publish
// safe to repeat. A duplicate is acknowledged like a stored message (and
// counted).
//
// Derive the key from the input (Msg.ID, or a field that names the
// request), never from a value two different requests can share: the second
// would be dropped as the first one's duplicate. An empty key is refused
// with ErrNoOutputKey, a permanent failure, because every redelivery would
// store the output again; pass NoDedup to publish without a message ID on
// purpose.
type Publisher interface {
	Publish(ctx context.Context, subject string, data []byte, key string) error
	// PublishAt has the output published at at (now, if at has passed)
	// instead of now, by the server, whether or not any instance runs
	// then; the output must be declared `delayed: true` in the manifest.
	// It returns once the output waits in its stream. The key deduplicates
	// it as Publish's does, also after it was published: a retried handler
	// schedules it once, and a later at does not move it. For a delay,
	// pass time.Now().Add(d).
	PublishAt(ctx context.Context, subject string, data []byte, key string, at time.Time) error
}

// NoDedup, given to Publish as the key, publishes without a message ID: a
// redelivery publishes the output again. It is for outputs whose readers
// deduplicate by themselves, or that may repeat.
const NoDedup = "\x00no-dedup"

// Deps is what the runtime gives a function's constructor.
type Deps struct {
	// Logger already carries the function's name.
	Logger *slog.Logger
	// Config is the function's `config:` block from the manifest.
	Config Config
	// Publisher publishes the function's outputs.
	Publisher Publisher
	// Mongo is the database named by MONGO_DATABASE; nil when the runtime
	// was started without one.
	Mongo *mongo.Database
}

// Need names the dependencies a constructor requires of Deps.
type Need uint8

// The dependencies Deps.Require can check.
const (
	NeedMongo Need = 1 << iota
	NeedPublisher
)

// ErrNoMongo and ErrNoPublisher are what Require reports for a dependency
// the runtime did not give: Mongo when it was started without MONGO_URI
// and MONGO_DATABASE, the Publisher when a test built Deps without one.
var (
	ErrNoMongo     = errors.New("needs Mongo (set MONGO_URI and MONGO_DATABASE)")
	ErrNoPublisher = errors.New("needs a publisher")
)

// Require reports every dependency in needs that d lacks, naming function,
// so each constructor refuses a missing one with the same words.
func (d Deps) Require(function string, needs Need) error {
	var errs []error
	if needs&NeedMongo != 0 && d.Mongo == nil {
		errs = append(errs, fmt.Errorf("%s %w", function, ErrNoMongo))
	}
	if needs&NeedPublisher != 0 && d.Publisher == nil {
		errs = append(errs, fmt.Errorf("%s %w", function, ErrNoPublisher))
	}
	return errors.Join(errs...)
}

// Log is d.Logger, or a logger that discards when there is none (Deps a
// unit test built).
func (d Deps) Log() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

// Constructor builds a function's handler from its dependencies. It runs once
// per binding at start-up; an error stops the runtime before any message is
// taken.
type Constructor func(Deps) (Handler, error)

// Function is one compiled-in function: the name a manifest uses, its
// constructor, and the check of its config block.
type Function struct {
	Name string
	New  Constructor
	// CheckConfig decodes and validates the config block without touching
	// any dependency; check, deploy and Apply call it (through
	// CheckConfigs), so a bad block is refused before anything is bound
	// rather than when New runs. It should share New's decoding, so the two
	// cannot drift. Nil leaves the block to New.
	CheckConfig func(Config) error
}
