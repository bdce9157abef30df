package publishrecordingevent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/jetfn/jetfn/events"
)

// The recording document is events.Recording plus bookkeeping that makes
// each write idempotent and order-independent without a transaction. Each
// write is one single-document update, guarded by its filter; MongoDB
// applies those atomically, FerretDB does not (see recordingLocks).
//
// FerretDB answers only a filter of exactly {_id: <string>} from an index.
// Timeline lookups are of that form; the guarded updates add conditions, so
// on FerretDB they scan recordings (one small document per recording).
//
//   - An event is counted once: count increments eventCount and adds the
//     event's key to counted in one update whose filter requires the key to
//     be absent from counted; then the timeline entry is inserted. Keys stay
//     in counted for good, so however two deliveries of one event
//     interleave (on two instances, a redelivery while the first delivery
//     still runs), the second's update finds the key and changes nothing:
//     eventCount is always the number of keys in counted. The price is one
//     key ("<event>:<ts>", about 40 bytes stored) per distinct event in the
//     document: some 400,000 events before MongoDB's 16 MiB limit. A
//     delivery that finds its event in the timeline skips count; that also
//     keeps an event counted by an earlier version of this function, whose
//     key is not in counted, from being counted again.
//   - stateKey is "<ts, 20 digits>:<lifecycle rank>:<event>", which sorts
//     as the state rule does; count raises it with $max. Only the handler
//     whose key is the maximum sets state (filter stateKey = its key), so a
//     late older event can never move state back.
//   - deleteKey is "<ts, 20 digits>:<reason>" of the latest deleted event,
//     raised with $max; only its handler sets reason.
//   - stored is set (with failed=false) by a stored event; a deleted event
//     sets failed=true only while stored is not true.
type recordingDoc struct {
	events.Recording `bson:",inline"`
	Counted          []string `bson:"counted"`
	StateKey         string   `bson:"stateKey"`
	DeleteKey        string   `bson:"deleteKey,omitempty"`
	Stored           bool     `bson:"stored"`
}

// eventDoc is one timeline entry. Payload is the exact JSON the backend
// sent, so no field is lost; it is a string because Mongo-compatible stores
// refuse some JSON keys (a leading '$', a '.') as sub-document keys.
type eventDoc struct {
	ID             string                    `bson:"_id"`
	RecordingID    string                    `bson:"recordingId"`
	ConversationID string                    `bson:"conversationId"`
	Event          events.RecordingEventName `bson:"event"`
	TS             int64                     `bson:"ts"`
	Reason         string                    `bson:"reason,omitempty"`
	Payload        string                    `bson:"payload"`
}

// maxCountAttempts bounds the retries of count when its upsert races the
// creation of the same recording by another handler.
const maxCountAttempts = 3

type store struct {
	recordings *mongo.Collection
	timeline   *mongo.Collection
}

func newStore(db *mongo.Database) store {
	return store{
		recordings: db.Collection(events.RecordingsCollection),
		timeline:   db.Collection(events.RecordingEventsCollection),
	}
}

// record applies ev to its recording and timeline and returns the
// recording as it stands after ev. Each step may have run before, in a
// delivery that crashed; each one is then a no-op.
func (s store) record(ctx context.Context, ev events.RecordingEvent, payload []byte) (recordingDoc, error) {
	doc, err := s.countOnce(ctx, ev, payload)
	if err != nil {
		return doc, err
	}
	if err := s.settleState(ctx, ev, &doc); err != nil {
		return doc, err
	}
	if ev.Event == events.RecordingDeleted {
		return doc, s.settleDeleted(ctx, ev, &doc)
	}
	return doc, nil
}

// countOnce counts ev and adds it to the timeline unless an earlier
// delivery did.
func (s store) countOnce(ctx context.Context, ev events.RecordingEvent, payload []byte) (recordingDoc, error) {
	counted, err := s.inTimeline(ctx, ev)
	if err != nil {
		return recordingDoc{}, err
	}
	if counted {
		return s.read(ctx, ev)
	}
	doc, err := s.count(ctx, ev)
	if err != nil {
		return doc, err
	}
	return doc, s.addToTimeline(ctx, ev, payload)
}

// read is the recording of an event already counted.
func (s store) read(ctx context.Context, ev events.RecordingEvent) (recordingDoc, error) {
	doc, _, err := s.lookup(ctx, ev)
	if err == nil && doc.ID == "" {
		err = fmt.Errorf("%s is in the timeline but its recording is missing", ev.MsgID())
	}
	return doc, err
}

func (s store) inTimeline(ctx context.Context, ev events.RecordingEvent) (bool, error) {
	err := s.timeline.FindOne(ctx, bson.D{{Key: "_id", Value: ev.MsgID()}}).Err()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up %s: %w", ev.MsgID(), err)
	}
	return true, nil
}

// count adds ev to its recording. The upsert's filter matches only a
// recording of the same conversation that has not counted ev; otherwise it
// tries an insert, which fails on the _id, and lookup tells which case it
// was.
func (s store) count(ctx context.Context, ev events.RecordingEvent) (recordingDoc, error) {
	filter := bson.D{
		{Key: "_id", Value: ev.RecordingID},
		{Key: "conversationId", Value: ev.ConversationID},
		{Key: "counted", Value: bson.D{{Key: "$ne", Value: eventKey(ev)}}},
	}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	for range maxCountAttempts {
		var doc recordingDoc
		err := s.recordings.FindOneAndUpdate(ctx, filter, countUpdate(ev), opts).Decode(&doc)
		if err == nil {
			return doc, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return doc, fmt.Errorf("counting %s: %w", ev.MsgID(), err)
		}
		doc, found, err := s.lookup(ctx, ev)
		if err != nil || found {
			return doc, err
		}
	}
	return recordingDoc{}, fmt.Errorf("counting %s: the recording kept changing under the upsert", ev.MsgID())
}

func countUpdate(ev events.RecordingEvent) bson.D {
	set := bson.D{}
	onInsert := bson.D{{Key: "state", Value: ev.Event}}
	switch ev.Event {
	case events.RecordingStored:
		set = append(set, bson.E{Key: "stored", Value: true}, bson.E{Key: "failed", Value: false})
	default:
		onInsert = append(onInsert, bson.E{Key: "stored", Value: false}, bson.E{Key: "failed", Value: false})
	}
	maxes := bson.D{{Key: "lastTs", Value: ev.TS}, {Key: "stateKey", Value: stateKey(ev)}}
	if ev.Event == events.RecordingDeleted {
		maxes = append(maxes, bson.E{Key: "deleteKey", Value: deleteKey(ev)})
	}
	update := bson.D{
		{Key: "$setOnInsert", Value: onInsert},
		{Key: "$min", Value: bson.D{{Key: "firstTs", Value: ev.TS}}},
		{Key: "$max", Value: maxes},
		{Key: "$inc", Value: bson.D{{Key: "eventCount", Value: 1}}},
		{Key: "$push", Value: bson.D{{Key: "counted", Value: eventKey(ev)}}},
	}
	if len(set) > 0 {
		update = append(update, bson.E{Key: "$set", Value: set})
	}
	return update
}

// lookup reads ev's recording. It explains a count upsert that hit the
// _id: found is true when ev is counted already (by another delivery, one
// that crashed before the timeline insert or one still running); an error
// when the recording belongs to another conversation; neither when a
// concurrent handler created the recording between the filter and the
// insert, so count retries.
func (s store) lookup(ctx context.Context, ev events.RecordingEvent) (recordingDoc, bool, error) {
	var doc recordingDoc
	err := s.recordings.FindOne(ctx, bson.D{{Key: "_id", Value: ev.RecordingID}}).Decode(&doc)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return doc, false, nil
	case err != nil:
		return doc, false, fmt.Errorf("reading recording %s: %w", ev.RecordingID, err)
	case doc.ConversationID != ev.ConversationID:
		return doc, false, fmt.Errorf("%w: recording %s is in conversation %s, the event says %s",
			ErrConversationMismatch, ev.RecordingID, doc.ConversationID, ev.ConversationID)
	}
	return doc, slices.Contains(doc.Counted, eventKey(ev)), nil
}

// settleState sets state to ev if ev holds the highest stateKey.
func (s store) settleState(ctx context.Context, ev events.RecordingEvent, doc *recordingDoc) error {
	key := stateKey(ev)
	if doc.StateKey != key || doc.State == ev.Event {
		return nil
	}
	filter := bson.D{{Key: "_id", Value: ev.RecordingID}, {Key: "stateKey", Value: key}}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "state", Value: ev.Event}}}}
	if _, err := s.recordings.UpdateOne(ctx, filter, update); err != nil {
		return fmt.Errorf("setting state of %s: %w", ev.RecordingID, err)
	}
	doc.State = ev.Event
	return nil
}

// settleDeleted sets the reason (if ev is the latest deleted event) and
// failed (if the recording has not been stored).
func (s store) settleDeleted(ctx context.Context, ev events.RecordingEvent, doc *recordingDoc) error {
	id := bson.E{Key: "_id", Value: ev.RecordingID}
	if doc.DeleteKey == deleteKey(ev) && doc.Reason != ev.Reason {
		filter := bson.D{id, {Key: "deleteKey", Value: deleteKey(ev)}}
		update := bson.D{{Key: "$set", Value: bson.D{{Key: "reason", Value: ev.Reason}}}}
		if _, err := s.recordings.UpdateOne(ctx, filter, update); err != nil {
			return fmt.Errorf("setting reason of %s: %w", ev.RecordingID, err)
		}
		doc.Reason = ev.Reason
	}
	if doc.Stored || doc.Failed {
		return nil
	}
	filter := bson.D{id, {Key: "stored", Value: bson.D{{Key: "$ne", Value: true}}}}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "failed", Value: true}}}}
	res, err := s.recordings.UpdateOne(ctx, filter, update)
	if err != nil {
		return fmt.Errorf("marking %s failed: %w", ev.RecordingID, err)
	}
	doc.Failed = res.MatchedCount > 0
	return nil
}

// addToTimeline inserts ev's timeline entry; one already there (a
// redelivery) is left as it is.
func (s store) addToTimeline(ctx context.Context, ev events.RecordingEvent, payload []byte) error {
	doc := eventDoc{ID: ev.MsgID(), RecordingID: ev.RecordingID, ConversationID: ev.ConversationID,
		Event: ev.Event, TS: ev.TS, Reason: ev.Reason, Payload: string(payload)}
	_, err := s.timeline.InsertOne(ctx, doc)
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("storing %s: %w", ev.MsgID(), err)
	}
	return nil
}

func eventKey(ev events.RecordingEvent) string {
	return fmt.Sprintf("%s:%d", ev.Event, ev.TS)
}

// stateKey sorts (as a string) like the state rule: by ts, then by
// lifecycle rank. It ends in the event's name, so the state it stands for
// can be read back (stateOf).
func stateKey(ev events.RecordingEvent) string {
	return fmt.Sprintf("%020d:%d:%s", ev.TS, ev.Event.Rank(), ev.Event)
}

func stateOf(key string) events.RecordingEventName {
	parts := strings.SplitN(key, ":", 3)
	return events.RecordingEventName(parts[len(parts)-1])
}

// deleteKey sorts by ts, then by reason, so of several deleted events the
// same one wins in any order.
func deleteKey(ev events.RecordingEvent) string {
	return fmt.Sprintf("%020d:%s", ev.TS, ev.Reason)
}
