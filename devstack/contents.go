package devstack

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Contents is what a stack's servers hold: what `jetfn dev` says it reused.
type Contents struct {
	Streams     int
	Messages    uint64
	Consumers   int
	Collections int
	Documents   int64
}

// String reads "4 streams with 12 messages, 2 consumers, 9 documents in 3
// collections".
func (c Contents) String() string {
	return fmt.Sprintf("%s with %s, %s, %s in %s",
		count(c.Streams, "stream"), count(int(c.Messages), "message"), count(c.Consumers, "consumer"),
		count(int(c.Documents), "document"), count(c.Collections, "collection"))
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Count reads what ns holds and what database holds on mongo.
func Count(ctx context.Context, ns *server.Server, m *Mongo, database string) (Contents, error) {
	c, err := countStreams(ns)
	if err != nil {
		return Contents{}, err
	}
	client, err := mongo.Connect(options.Client().ApplyURI(m.URI).SetServerSelectionTimeout(readyTimeout))
	if err != nil {
		return c, fmt.Errorf("counting documents: %w", err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	db := client.Database(database)
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return c, fmt.Errorf("counting documents: %w", err)
	}
	for _, name := range names {
		n, err := db.Collection(name).EstimatedDocumentCount(ctx)
		if err != nil {
			return c, fmt.Errorf("counting documents in %s: %w", name, err)
		}
		c.Collections++
		c.Documents += n
	}
	return c, nil
}

// countStreams counts the streams, their messages and consumers, but for
// jetfn's own KV buckets (manifests, consumer positions, replay records):
// what was reused is the application's data.
func countStreams(ns *server.Server) (Contents, error) {
	js, err := ns.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		return Contents{}, fmt.Errorf("counting streams: %w", err)
	}
	var c Contents
	for _, acc := range js.AccountDetails {
		for _, s := range acc.Streams {
			if strings.HasPrefix(s.Name, "KV_jetfn-") {
				continue
			}
			c.Streams++
			c.Messages += s.State.Msgs
			c.Consumers += s.State.Consumers
		}
	}
	return c, nil
}
