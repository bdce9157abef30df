package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Subject is the endpoint the manifest's remote.subject names.
const Subject = "greeter.handle"

// request is the greet.requested payload, which jetfn passes on unchanged.
type request struct {
	Name string `json:"name"`
}

// output is one entry of the reply's outputs: jetfn publishes data to
// subject with a message ID scoped from key, so the greeting is stored
// once however often the request is delivered.
type output struct {
	Subject string `json:"subject"`
	Data    any    `json:"data"`
	Key     string `json:"key"`
}

// greeter stores one greeting per request, keyed by Jetfn-Msg-Id.
type greeter struct {
	greetings *mongo.Collection
	log       *slog.Logger
}

// addService registers the greeter as a micro service. Every instance
// joins micro's default queue group, so instances share the requests.
func addService(nc *nats.Conn, g *greeter) (micro.Service, error) {
	return micro.AddService(nc, micro.Config{
		Name:        "greeter",
		Version:     "1.0.0",
		Description: "jetfn remote function example: greet.requested → greet.done",
		Endpoint:    &micro.EndpointConfig{Subject: Subject, Handler: micro.HandlerFunc(g.handle)},
	})
}

// handle answers one delivery. Its reply decides what jetfn does: a 400 is
// dead-lettered at once, a 500 retried on the manifest's backoff, and a
// success stores the output, then acks.
func (g *greeter) handle(req micro.Request) {
	id := req.Headers().Get("Jetfn-Msg-Id")
	if id == "" {
		_ = req.Error("400", "no Jetfn-Msg-Id header: not a jetfn delivery", nil)
		return
	}
	var r request
	if err := json.Unmarshal(req.Data(), &r); err != nil || r.Name == "" {
		_ = req.Error("400", "bad payload: want {\"name\": \"...\"}", nil)
		return
	}
	ctx, cancel := deadlineContext(req.Headers().Get("Jetfn-Deadline"))
	defer cancel()
	greeting := "hello, " + r.Name
	if err := g.store(ctx, id, r.Name, greeting); err != nil {
		g.log.Warn("storing a greeting", "msg_id", id, "err", err)
		_ = req.Error("500", "storing the greeting failed", nil)
		return
	}
	body, err := json.Marshal(map[string][]output{"outputs": {
		{Subject: "greet.done", Data: map[string]string{"greeting": greeting, "request": id}, Key: id},
	}})
	if err != nil {
		_ = req.Error("500", err.Error(), nil)
		return
	}
	_ = req.Respond(body)
}

// store upserts the greeting by the delivery's Jetfn-Msg-Id, so a
// redelivery (the same ID) finds the document it stored the first time.
func (g *greeter) store(ctx context.Context, id, name, greeting string) error {
	_, err := g.greetings.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "name", Value: name}, {Key: "greeting", Value: greeting},
			{Key: "created", Value: time.Now().UTC()}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("upserting greeting %s: %w", id, err)
	}
	return nil
}

// deadlineContext ends when jetfn stops waiting for the reply: work past
// that moment is wasted, since jetfn retries the message anyway.
func deadlineContext(header string) (context.Context, context.CancelFunc) {
	deadline, err := time.Parse(time.RFC3339Nano, header)
	if err != nil {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}
	return context.WithDeadline(context.Background(), deadline)
}

// errNoSetting is a required environment variable left empty.
var errNoSetting = errors.New("required")
