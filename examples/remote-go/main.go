// Command remote-go is jetfn's Go remote function example: a NATS micro
// service that handles greet.requested for the manifest's remote-greet
// function. It uses nats.go's micro package and the MongoDB driver, and
// nothing of jetfn: a remote in any language speaks the same contract
// (docs/remote.md).
//
//	NATS_URL=nats://127.0.0.1:4222 MONGO_URI=mongodb://127.0.0.1:27017/ go run ./examples/remote-go
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.Error("greeter stopped", "err", err)
		os.Exit(1)
	}
}

// run serves until ctx is done, then stops the service and drains.
func run(ctx context.Context, log *slog.Logger) error {
	natsURL, mongoURI := os.Getenv("NATS_URL"), os.Getenv("MONGO_URI")
	if natsURL == "" || mongoURI == "" {
		return fmt.Errorf("NATS_URL and MONGO_URI: %w", errNoSetting)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(mongoURI))
	if err != nil {
		return fmt.Errorf("connecting to MongoDB: %w", err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	nc, err := nats.Connect(natsURL, nats.Name("greeter"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connecting to NATS: %w", err)
	}
	defer func() { _ = nc.Drain() }()
	db := os.Getenv("MONGO_DATABASE")
	if db == "" {
		db = "jetfn"
	}
	svc, err := addService(nc, &greeter{greetings: client.Database(db).Collection("greetings"), log: log})
	if err != nil {
		return fmt.Errorf("registering the greeter: %w", err)
	}
	log.Info("greeter ready", "subject", Subject, "id", svc.Info().ID)
	<-ctx.Done()
	return svc.Stop()
}
