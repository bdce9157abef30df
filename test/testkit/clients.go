package testkit

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// CloseClients disconnects a harness's own Mongo client and closes its NATS
// connection. Either may be nil: a harness closes whatever a start that
// failed halfway left behind.
func CloseClients(nc *nats.Conn, mc *mongo.Client) {
	if mc != nil {
		_ = mc.Disconnect(context.Background())
	}
	if nc != nil {
		nc.Close()
	}
}
