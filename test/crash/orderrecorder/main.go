// Command orderrecorder is the remote function of the crash harness's
// ordered rows (test/crash/ordered.go): a NATS micro service that records,
// for every request jetfn sends it, the key and the input's original stream
// sequence, so the harness can check that every key's effects are in
// stream order, each once, whatever was killed.
//
// It is a remote function rather than a handler compiled into jetfn
// because the crash harness runs the shipped `jetfn run` binary, which has
// no test hooks and only the shipped functions, none of them keyed by a
// subject token; a remote is how a user would plug any function into that
// binary, and it keeps its effects in the harness's Mongo.
//
// For a request on a key with sequence s (Jetfn-Stream-Seq), it:
//   - fails with a 500, storing nothing but a run, while Jetfn-Delivery is at
//     most the payload's "fail" (the failing key of the rows);
//   - otherwise adds s to the key's document in ordered_keys with one
//     atomic $addToSet, reading the array as it was before: the array is
//     the order in which the key's effects first happened, each once, and a
//     redelivery of an applied s (after a SIGKILL) changes nothing;
//   - appends a document to ordered_runs for every run: key, s, the
//     delivery, whether it failed, and the key's applied sequences just
//     before it, so the checker can tell a repeat (s already applied) from
//     a run that came before an earlier sequence's effect or after a later
//     one's;
//   - replies with one output on recorded.orders ({key, seq}) keyed by
//     Jetfn-Msg-Id, which jetfn publishes once with a scoped message ID.
//
// The key is the input's header Order-Key, else its payload's field "key"
// (the routed rows, whose subject does not carry it), else token 2 of
// Jetfn-Subject (the rows keyed by subject token). It is read from the
// message as published, never from what jetfn adds.
//
// Each request is handled on its own goroutine after a random pause of up
// to 3ms: a service that handled requests one at a time, in arrival order,
// would hide a runtime that sent two messages of one key at once. Only the
// writes of one key are serialized (see recorder.locks), after the pause.
//
//	NATS_URL=... MONGO_URI=... MONGO_DATABASE=... go run ./test/crash/orderrecorder
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/test/crash/orderrun"
)

// The service's names, which test/crash/ordered.go repeats in its manifest
// and its reads.
const (
	serviceName    = "order-recorder"
	subject        = "recorder.record"
	outputSubject  = "recorded.orders"
	keysCollection = "ordered_keys"
	keyToken       = 2
	keyHeader      = "Order-Key"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.Error("order recorder stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	natsURL, mongoURI, db := os.Getenv("NATS_URL"), os.Getenv("MONGO_URI"), os.Getenv("MONGO_DATABASE")
	if natsURL == "" || mongoURI == "" || db == "" {
		return fmt.Errorf("NATS_URL, MONGO_URI and MONGO_DATABASE are required")
	}
	client, err := mongo.Connect(options.Client().ApplyURI(mongoURI))
	if err != nil {
		return fmt.Errorf("connecting to MongoDB: %w", err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	nc, err := nats.Connect(natsURL, nats.Name(serviceName), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connecting to NATS: %w", err)
	}
	defer func() { _ = nc.Drain() }()
	r := &recorder{keys: client.Database(db).Collection(keysCollection), runs: client.Database(db).Collection(orderrun.Collection), log: log}
	svc, err := micro.AddService(nc, micro.Config{
		Name: serviceName, Version: "1.0.0",
		Description: "crash harness: records each key's effects with the input's stream sequence",
		Endpoint: &micro.EndpointConfig{Subject: subject, Handler: micro.HandlerFunc(func(req micro.Request) {
			go r.handle(req)
		})},
	})
	if err != nil {
		return fmt.Errorf("registering the service: %w", err)
	}
	log.Info("order recorder ready", "subject", subject)
	<-ctx.Done()
	return svc.Stop()
}

type recorder struct {
	keys, runs *mongo.Collection
	log        *slog.Logger
	// locks serialize the writes of one key. FerretDB on SQLite (the
	// harness's Mongo) does not isolate a findOneAndUpdate from a
	// concurrent one on the same document: with four runs of a key at once
	// it lost $addToSet entries. Runs of one key at once are still seen,
	// as each run records the effects applied before it.
	locks sync.Map // key → *sync.Mutex
}

func (r *recorder) lock(key string) func() {
	m, _ := r.locks.LoadOrStore(key, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// payload is the input's JSON: Fail is how many deliveries of the message
// fail before one succeeds; Key is a routed row's key, which its header
// Order-Key also carries.
type payload struct {
	Fail int64  `json:"fail"`
	Key  string `json:"key"`
}

func (r *recorder) handle(req micro.Request) {
	h := req.Headers()
	id := h.Get("Jetfn-Msg-Id")
	tokens := strings.Split(h.Get("Jetfn-Subject"), ".")
	seq, seqErr := strconv.ParseInt(h.Get("Jetfn-Stream-Seq"), 10, 64)
	delivery, delErr := strconv.ParseInt(h.Get("Jetfn-Delivery"), 10, 64)
	var p payload
	if id == "" || len(tokens) < keyToken || seqErr != nil || delErr != nil || json.Unmarshal(req.Data(), &p) != nil {
		_ = req.Error("400", "not a jetfn request of the ordered rows", nil)
		return
	}
	key := h.Get(keyHeader)
	if key == "" {
		key = p.Key
	}
	if key == "" {
		key = tokens[keyToken-1]
	}
	ctx, cancel := deadlineContext(h.Get("Jetfn-Deadline"))
	defer cancel()
	time.Sleep(rand.N(3 * time.Millisecond))
	run := orderrun.Run{Key: key, Seq: seq, Delivery: delivery, Failed: delivery <= p.Fail}
	err := r.record(ctx, &run)
	switch {
	case err != nil:
		r.log.Warn("recording", "key", key, "seq", seq, "err", err)
		_ = req.Error("500", "recording failed: "+err.Error(), nil)
	case run.Failed:
		_ = req.Error("500", fmt.Sprintf("failing delivery %d of %d on purpose", delivery, p.Fail), nil)
	default:
		body, _ := json.Marshal(map[string]any{"outputs": []map[string]any{
			{"subject": outputSubject, "data": map[string]any{"key": key, "seq": seq}, "key": id},
		}})
		_ = req.Respond(body)
	}
}

// record applies the run's effect (unless it fails on purpose) and stores
// the run with the effects its key had before it.
func (r *recorder) record(ctx context.Context, run *orderrun.Run) error {
	defer r.lock(run.Key)()
	var err error
	if run.Failed {
		run.Before, err = r.applied(ctx, run.Key)
	} else {
		run.Before, err = r.apply(ctx, run.Key, run.Seq)
	}
	if err != nil {
		return err
	}
	run.At = time.Now().UTC()
	_, err = r.runs.InsertOne(ctx, run)
	return err
}

// keyDoc is a key's document in ordered_keys.
type keyDoc struct {
	Seqs []int64 `bson:"seqs"`
}

// apply adds seq to the key's applied sequences, once, and returns them as
// they were before.
func (r *recorder) apply(ctx context.Context, key string, seq int64) ([]int64, error) {
	var before keyDoc
	err := r.keys.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: key}},
		bson.D{{Key: "$addToSet", Value: bson.D{{Key: "seqs", Value: seq}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.Before)).Decode(&before)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return []int64{}, nil
	}
	return orEmpty(before.Seqs), err
}

// applied reads the key's applied sequences.
func (r *recorder) applied(ctx context.Context, key string) ([]int64, error) {
	var doc keyDoc
	err := r.keys.FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return []int64{}, nil
	}
	return orEmpty(doc.Seqs), err
}

func orEmpty(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

// deadlineContext ends when jetfn stops waiting for the reply, so a run
// that jetfn gave up on does not record an effect after its message was
// handed out again.
func deadlineContext(header string) (context.Context, context.CancelFunc) {
	deadline, err := time.Parse(time.RFC3339Nano, header)
	if err != nil {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}
	return context.WithDeadline(context.Background(), deadline)
}
