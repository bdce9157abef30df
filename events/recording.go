package events

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// RecordingEventName is one of the backend's recording events, as its
// RECORDING_EVENT log names them. There is no failed event: a recording
// that was requested but never started is published as deleted, with the
// cause in its reason.
type RecordingEventName string

// The nine recording events, in lifecycle order.
const (
	RecordingRequested     RecordingEventName = "requested"
	RecordingConfirmed     RecordingEventName = "recording-confirmed"
	RecordingStarted       RecordingEventName = "started"
	RecordingStopRequested RecordingEventName = "stop-requested"
	RecordingStopped       RecordingEventName = "stopped"
	RecordingUploaded      RecordingEventName = "uploaded"
	RecordingStored        RecordingEventName = "stored"
	RecordingDownloaded    RecordingEventName = "downloaded"
	RecordingDeleted       RecordingEventName = "deleted"
)

var recordingLifecycle = []RecordingEventName{
	RecordingRequested, RecordingConfirmed, RecordingStarted, RecordingStopRequested,
	RecordingStopped, RecordingUploaded, RecordingStored, RecordingDownloaded, RecordingDeleted,
}

// RecordingEventNames returns the nine event names in lifecycle order.
func RecordingEventNames() []RecordingEventName { return slices.Clone(recordingLifecycle) }

// Rank is the event's position in the lifecycle (0 for requested), or -1
// for an unknown name. It orders two events of one recording that carry the
// same ts.
func (n RecordingEventName) Rank() int { return slices.Index(recordingLifecycle, n) }

// Known reports whether n is one of the nine event names.
func (n RecordingEventName) Known() bool { return n.Rank() >= 0 }

// Mongo collections written by publish-recording-event.
const (
	// RecordingEventsCollection is the timeline: one document per distinct
	// event, _id RecordingMsgID.
	RecordingEventsCollection = "recordingevents"
	// RecordingsCollection holds one Recording per recording, _id its ID.
	RecordingsCollection = "recordings"
)

// Recording is a recording's state as publish-recording-event keeps it in
// RecordingsCollection. Redelivered, duplicated and out-of-order events
// leave it as if each distinct event had arrived once, in ts order.
type Recording struct {
	ID             string `bson:"_id" json:"recordingId"`
	ConversationID string `bson:"conversationId" json:"conversationId"`
	// State is the event with the highest ts; of two with the same ts, the
	// later one in the lifecycle.
	State   RecordingEventName `bson:"state" json:"state"`
	FirstTS int64              `bson:"firstTs" json:"firstTs"`
	LastTS  int64              `bson:"lastTs" json:"lastTs"`
	// EventCount counts distinct events (distinct RecordingMsgID).
	EventCount int `bson:"eventCount" json:"eventCount"`
	// Failed is true when the recording was deleted and never stored.
	Failed bool `bson:"failed" json:"failed"`
	// Reason is the deleted event's reason (of the latest one, if several).
	Reason string `bson:"reason,omitempty" json:"reason,omitempty"`
}

// RecordingSubject is where the backend publishes event n.
func RecordingSubject(n RecordingEventName) string { return "recording." + string(n) }

// RecordingNoticeSubject is where everyone in a conversation learns that
// one of its recordings changed.
func RecordingNoticeSubject(conversationID string) string {
	return "conversation." + conversationID + ".recording"
}

// RecordingMsgID is the Nats-Msg-Id of an event, <recordingId>:<event>:<ts>,
// and the key of the notice it causes. It is also the event's _id in Mongo.
// The notice's Nats-Msg-Id is the key scoped by the runtime to the function
// and the subject: "jetfn:publish-recording-event:conversation.<conversationId>.recording:<key>".
func RecordingMsgID(recordingID string, n RecordingEventName, ts int64) string {
	return recordingID + ":" + string(n) + ":" + strconv.FormatInt(ts, 10)
}

// RecordingEvent is the backend's log object for one recording state change,
// plus ts. Its rules are those of schemas/recording-event.schema.json
// (RecordingEventPayload), reason on deleted among them.
type RecordingEvent struct {
	// TS is when the backend logged the event, in epoch milliseconds.
	TS             int64              `json:"ts"`
	Event          RecordingEventName `json:"event"`
	RecordingID    string             `json:"recordingId"`
	ConversationID string             `json:"conversationId"`
	// Reason is required on deleted; on a recording that never started it
	// says why.
	Reason string `json:"reason,omitempty"`
	// Extra holds every other member of the log object, verbatim: the
	// contract keeps unknown members instead of refusing them. A member
	// that a field above names is the field's, never Extra's.
	Extra map[string]json.RawMessage `json:",embed"`
}

// Subject is the event's subject, recording.<event>.
func (e RecordingEvent) Subject() string { return RecordingSubject(e.Event) }

// MsgID is the event's Nats-Msg-Id, <recordingId>:<event>:<ts>.
func (e RecordingEvent) MsgID() string { return RecordingMsgID(e.RecordingID, e.Event, e.TS) }

// recordingEvent is RecordingEvent without its methods, for json v2 to
// encode and decode field by field, with Extra embedded.
type recordingEvent RecordingEvent

// recordingEventFields are the names RecordingEvent's fields take.
var recordingEventFields = []string{"ts", "event", "recordingId", "conversationId", "reason"}

// MarshalJSON writes the named fields, then Extra's members sorted by name,
// so equal events encode to equal bytes, for encoding/json and json v2
// alike. A member of Extra that a field names is dropped.
func (e RecordingEvent) MarshalJSON() ([]byte, error) {
	if slices.ContainsFunc(recordingEventFields, func(k string) bool { _, ok := e.Extra[k]; return ok }) {
		e.Extra = maps.Clone(e.Extra)
		for _, k := range recordingEventFields {
			delete(e.Extra, k)
		}
	}
	return jsonv2.Marshal(recordingEvent(e), jsonv2.Deterministic(true))
}

// UnmarshalJSONFrom is how json v2, and so RecordingEventPayload.Decode
// once the schema has accepted the payload, decodes an event: field by
// field, with the other members in Extra.
func (e *RecordingEvent) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return jsonv2.UnmarshalDecode(dec, (*recordingEvent)(e))
}

// UnmarshalJSON is for encoding/json: it decodes and checks the event with
// RecordingEventPayload, so a payload that breaks the contract is refused
// there too.
func (e *RecordingEvent) UnmarshalJSON(data []byte) error {
	ev, err := RecordingEventPayload.Decode(data)
	if err != nil {
		return err
	}
	*e = ev
	return nil
}

// RecordingNotice tells the participants of a conversation that one of its
// recordings changed. Its rules are those of
// schemas/recording-notice.schema.json (RecordingNoticePayload), reason
// when failed among them.
type RecordingNotice struct {
	RecordingID string             `json:"recordingId"`
	Event       RecordingEventName `json:"event"`
	TS          int64              `json:"ts"`
	// State is the recording's state after the event: the event with the
	// highest ts seen so far, which is not always this one.
	State RecordingEventName `json:"state"`
	// Failed is true when the recording was deleted without ever being
	// stored; Reason then says why.
	Failed bool   `json:"failed"`
	Reason string `json:"reason,omitempty"`
}
