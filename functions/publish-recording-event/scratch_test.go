package publishrecordingevent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

func TestScratch(t *testing.T) {
	_, client := runtimetest.StartMongo(t)
	db := client.Database("scratch")
	ctx := context.Background()
	ev := db.Collection("ev")
	_, err := ev.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "recordingId", Value: 1}, {Key: "ts", Value: 1}}})
	t.Log("index", err)
	start := time.Now()
	for r := 0; r < 100; r++ {
		for i := 0; i < 7; i++ {
			_, err := ev.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("r%d:%d", r, i)}, {Key: "recordingId", Value: fmt.Sprintf("r%d", r)}, {Key: "ts", Value: int64(i)}, {Key: "event", Value: "started"}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Log("700 inserts", time.Since(start))
	start = time.Now()
	for i := 0; i < 1000; i++ {
		_, err := ev.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("big:%d", i)}, {Key: "recordingId", Value: "big"}, {Key: "ts", Value: int64(i)}, {Key: "event", Value: "downloaded"}, {Key: "payload", Value: bson.M{"a": 1, "b": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Log("1000 inserts", time.Since(start))
	_, err = ev.InsertOne(ctx, bson.D{{Key: "_id", Value: "big:1"}})
	t.Logf("dup: %v IsDuplicateKeyError=%v", err, mongo.IsDuplicateKeyError(err))
	for _, n := range []int{1, 5} {
		start = time.Now()
		var cnt int
		for k := 0; k < n; k++ {
			cur, err := ev.Find(ctx, bson.D{{Key: "recordingId", Value: "big"}}, options.Find().SetProjection(bson.D{{Key: "event", Value: 1}, {Key: "ts", Value: 1}, {Key: "reason", Value: 1}}).SetBatchSize(5000))
			if err != nil {
				t.Fatal(err)
			}
			var docs []bson.M
			if err := cur.All(ctx, &docs); err != nil {
				t.Fatal(err)
			}
			cnt = len(docs)
		}
		t.Logf("find big x%d: %d docs, %s per find", n, cnt, time.Since(start)/time.Duration(n))
	}
	start = time.Now()
	c, err := ev.CountDocuments(ctx, bson.D{{Key: "recordingId", Value: "big"}})
	t.Log("count", c, err, time.Since(start))
	start = time.Now()
	c, err = ev.CountDocuments(ctx, bson.D{{Key: "recordingId", Value: "r5"}})
	t.Log("count small", c, err, time.Since(start))
	start = time.Now()
	cur, err := ev.Find(ctx, bson.D{{Key: "recordingId", Value: "r5"}})
	var docs []bson.M
	_ = cur.All(ctx, &docs)
	t.Log("find small", len(docs), err, time.Since(start))

	rec := db.Collection("rec")
	_, err = rec.UpdateOne(ctx, bson.D{{Key: "_id", Value: "x"}}, bson.D{
		{Key: "$min", Value: bson.D{{Key: "firstTs", Value: int64(5)}}},
		{Key: "$max", Value: bson.D{{Key: "lastTs", Value: int64(5)}}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "conversationId", Value: "c"}}},
		{Key: "$addToSet", Value: bson.D{{Key: "keys", Value: "a"}}},
	}, options.UpdateOne().SetUpsert(true))
	t.Log("min/max upsert", err)
	_, err = rec.UpdateOne(ctx, bson.D{{Key: "_id", Value: "x"}}, bson.D{
		{Key: "$min", Value: bson.D{{Key: "firstTs", Value: int64(3)}}},
		{Key: "$max", Value: bson.D{{Key: "lastTs", Value: int64(3)}}},
	}, options.UpdateOne().SetUpsert(true))
	var got bson.M
	_ = rec.FindOne(ctx, bson.D{{Key: "_id", Value: "x"}}).Decode(&got)
	t.Log("after", err, got)
	// guarded replace upsert when doc newer
	_, err = rec.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "x"}, {Key: "lastTs", Value: bson.D{{Key: "$lt", Value: int64(1)}}}}, bson.D{{Key: "lastTs", Value: int64(1)}}, options.Replace().SetUpsert(true))
	t.Logf("guarded replace: %v dup=%v", err, mongo.IsDuplicateKeyError(err))
	_, err = rec.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "x"}, {Key: "lastTs", Value: bson.D{{Key: "$lt", Value: int64(10)}}}}, bson.D{{Key: "lastTs", Value: int64(10)}}, options.Replace().SetUpsert(true))
	_ = rec.FindOne(ctx, bson.D{{Key: "_id", Value: "x"}}).Decode(&got)
	t.Logf("guarded replace 2: %v %v", err, got)
	_, err = ev.InsertOne(ctx, bson.D{{Key: "_id", Value: "dollar"}, {Key: "payload", Value: bson.M{"$x": 1, "a.b": 2}}})
	t.Logf("dollar key: %v", err)
}
