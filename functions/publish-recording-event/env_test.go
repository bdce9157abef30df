package publishrecordingevent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// testManifest binds the function as production does, with short waits.
const testManifest = `
streams:
  - name: RECORDING
    subjects: ["recording.>"]
  - name: NOTIFICATIONS
    subjects: ["conversation.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: publish-recording-event
    version: 1.0.0
    stream: RECORDING
    subject: recording.*
    ackWait: 10s
    maxDeliver: 5
    backoff: [100ms, 500ms]
    concurrency: 4
    outputs:
      - subject: conversation.*.recording
        stream: NOTIFICATIONS
`

// env is an embedded nats-server and FerretDB with the function running.
type env struct {
	t  *testing.T
	js jetstream.JetStream
	db *mongo.Database
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	_, client := runtimetest.StartMongo(t)
	e := &env{t: t, js: js, db: client.Database(dbName(t))}
	e.start(nc)
	return e
}

// dbName is a database name of the test's own, so no two tests share data.
func dbName(t *testing.T) string {
	name := regexp.MustCompile(`[^A-Za-z0-9_]`).ReplaceAllString(t.Name(), "_")
	return fmt.Sprintf("t_%.40s_%d", name, time.Now().UnixNano()%1e6)
}

func (e *env) start(nc *nats.Conn) {
	e.t.Helper()
	m, err := manifest.Parse([]byte(testManifest))
	if err != nil {
		e.t.Fatal(err)
	}
	level := slog.LevelError + 1
	if os.Getenv("JETFN_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	rt, err := runtime.New(nc, m, []jetfn.Function{{Name: Name, New: New}},
		runtime.WithMongo(e.db), runtime.WithLogger(log))
	if err != nil {
		e.t.Fatal(err)
	}
	runtimetest.RunInBackground(e.t, rt)
}

// publish stores each event on RECORDING without a message ID, so a
// duplicate reaches the function as the stream would redeliver it.
func (e *env) publish(evs ...events.RecordingEvent) {
	e.t.Helper()
	var futures []jetstream.PubAckFuture
	for _, ev := range evs {
		data, err := json.Marshal(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		f, err := e.js.PublishAsync(ev.Subject(), data)
		if err != nil {
			e.t.Fatal(err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			e.t.Fatal(err)
		case <-time.After(30 * time.Second):
			e.t.Fatal("no publish ack")
		}
	}
}

func (e *env) publishRaw(subject, payload string) {
	e.t.Helper()
	if _, err := e.js.Publish(context.Background(), subject, []byte(payload)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) consumer() *jetstream.ConsumerInfo {
	e.t.Helper()
	c, err := e.js.Consumer(context.Background(), "RECORDING", Name)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info
}

// waitSettled waits until the function has settled (acked or terminated)
// all n messages stored on RECORDING.
func (e *env) waitSettled(n int, timeout time.Duration) {
	e.t.Helper()
	runtimetest.Eventually(e.t, timeout, fmt.Sprintf("%d events settled", n), func() bool {
		info := e.consumer()
		return info.Delivered.Stream >= uint64(n) && info.NumPending == 0 && info.NumAckPending == 0
	})
}

func (e *env) recording(id string) recordingDoc {
	e.t.Helper()
	var doc recordingDoc
	err := e.db.Collection(events.RecordingsCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&doc)
	if err != nil {
		e.t.Fatalf("reading recording %s: %v", id, err)
	}
	if len(doc.Counted) != doc.EventCount {
		e.t.Errorf("recording %s has eventCount %d and %d counted keys %v", id, doc.EventCount, len(doc.Counted), doc.Counted)
	}
	return doc
}

func (e *env) timeline(recordingID string) []eventDoc {
	e.t.Helper()
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})
	cur, err := e.db.Collection(events.RecordingEventsCollection).Find(context.Background(),
		bson.D{{Key: "recordingId", Value: recordingID}}, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	var docs []eventDoc
	if err := cur.All(context.Background(), &docs); err != nil {
		e.t.Fatal(err)
	}
	return docs
}

// notice is one message on NOTIFICATIONS.
type notice struct {
	subject string
	msgID   string
	data    []byte
	body    events.RecordingNotice
}

// streamMsgs returns every message stored on stream, in order.
func (e *env) streamMsgs(stream string) []*jetstream.RawStreamMsg {
	e.t.Helper()
	return runtimetest.StreamMessages(e.t, e.js, stream)
}

func (e *env) notices() []notice {
	e.t.Helper()
	var out []notice
	for _, m := range e.streamMsgs("NOTIFICATIONS") {
		n := notice{subject: m.Subject, msgID: m.Header.Get(jetstream.MsgIDHeader), data: m.Data}
		if err := json.Unmarshal(m.Data, &n.body); err != nil {
			e.t.Fatalf("notice %s: %v", m.Data, err)
		}
		out = append(out, n)
	}
	return out
}

func (e *env) streamCount(stream string) int {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), stream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return int(info.State.Msgs)
}

// startStopDelete is the backend's seven events for a recording that was
// started, stopped, stored and then deleted, one second apart.
func startStopDelete(recordingID, conversationID string, ts int64) []events.RecordingEvent {
	names := []events.RecordingEventName{events.RecordingRequested, events.RecordingConfirmed,
		events.RecordingStarted, events.RecordingStopRequested, events.RecordingStopped,
		events.RecordingStored, events.RecordingDeleted}
	evs := make([]events.RecordingEvent, len(names))
	for i, n := range names {
		evs[i] = recEvent(recordingID, conversationID, n, ts+int64(i)*1000)
	}
	evs[len(evs)-1].Reason = "user-deleted"
	return evs
}

func recEvent(recordingID, conversationID string, n events.RecordingEventName, ts int64) events.RecordingEvent {
	return events.RecordingEvent{TS: ts, Event: n, RecordingID: recordingID, ConversationID: conversationID,
		Extra: map[string]json.RawMessage{"by": json.RawMessage(`"backend"`)}}
}

var noticeSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	return events.CompileSchema("recording-notice.schema.json")
})

// noticeSchemaErr validates a notice as a consumer in another language
// would, against the schema file.
func noticeSchemaErr(data []byte) error {
	s, err := noticeSchema()
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(v)
}
