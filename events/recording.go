package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
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

// Subjects of the recording contract.
const (
	// RecordingSubjects matches every recording event; the backend publishes
	// each one to recording.<event>.
	RecordingSubjects = "recording.*"
	// RecordingNoticeSubjects matches every participant notice.
	RecordingNoticeSubjects = "conversation.*.recording"
)

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
// plus ts. schemas/recording-event.schema.json is the same contract.
type RecordingEvent struct {
	// TS is when the backend logged the event, in epoch milliseconds.
	TS             int64              `json:"ts" required:"true"`
	Event          RecordingEventName `json:"event" required:"true"`
	RecordingID    string             `json:"recordingId" required:"true"`
	ConversationID string             `json:"conversationId" required:"true"`
	// Reason is required on deleted; on a recording that never started it
	// says why.
	Reason string `json:"reason,omitempty"`
	// Extra holds every other field of the log object, verbatim: the
	// contract keeps unknown fields instead of refusing them.
	Extra map[string]json.RawMessage `json:"-"`
}

// Subject is the event's subject, recording.<event>.
func (e RecordingEvent) Subject() string { return RecordingSubject(e.Event) }

// MsgID is the event's Nats-Msg-Id, <recordingId>:<event>:<ts>.
func (e RecordingEvent) MsgID() string { return RecordingMsgID(e.RecordingID, e.Event, e.TS) }

// Validate reports every rule the event breaks beyond its JSON shape.
func (e RecordingEvent) Validate() error {
	var errs []error
	if e.TS <= 0 {
		errs = append(errs, fmt.Errorf("ts %d is not positive", e.TS))
	}
	if !e.Event.Known() {
		errs = append(errs, fmt.Errorf("unknown event %q", e.Event))
	}
	errs = append(errs, validateID("recordingId", e.RecordingID), validateID("conversationId", e.ConversationID))
	if e.Event == RecordingDeleted && e.Reason == "" {
		errs = append(errs, errors.New("reason is required on deleted"))
	}
	return errors.Join(errs...)
}

// recordingEventFields are the keys RecordingEvent names; the rest go to Extra.
var recordingEventFields = []string{"ts", "event", "recordingId", "conversationId", "reason"}

// MarshalJSON writes the named fields and then Extra, whose keys are sorted
// so equal events encode to equal bytes.
func (e RecordingEvent) MarshalJSON() ([]byte, error) {
	obj := map[string]any{
		"ts": e.TS, "event": e.Event, "recordingId": e.RecordingID, "conversationId": e.ConversationID,
	}
	if e.Reason != "" {
		obj["reason"] = e.Reason
	}
	for k, v := range e.Extra {
		if !slices.Contains(recordingEventFields, k) {
			obj[k] = v
		}
	}
	return json.Marshal(obj) // encoding/json sorts map keys
}

// UnmarshalJSON checks the payload's shape as the schema does: one object,
// the required keys present, each named field of its JSON type (null is
// not a string). Unknown fields are kept in Extra.
func (e *RecordingEvent) UnmarshalJSON(data []byte) error {
	obj, err := decodeObject(data)
	if err != nil {
		return err
	}
	var out RecordingEvent
	errs := []error{
		requireKeys(obj, "ts", "event", "recordingId", "conversationId"),
		decodeTS(obj, "ts", &out.TS),
		decodeString(obj, "event", (*string)(&out.Event)),
		decodeString(obj, "recordingId", &out.RecordingID),
		decodeString(obj, "conversationId", &out.ConversationID),
		decodeString(obj, "reason", &out.Reason),
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, k := range recordingEventFields {
		delete(obj, k)
	}
	if len(obj) > 0 {
		out.Extra = obj
	}
	*e = out
	return nil
}

// RecordingNotice tells the participants of a conversation that one of its
// recordings changed. schemas/recording-notice.schema.json is the same
// contract.
type RecordingNotice struct {
	RecordingID string             `json:"recordingId" required:"true"`
	Event       RecordingEventName `json:"event" required:"true"`
	TS          int64              `json:"ts" required:"true"`
	// State is the recording's state after the event: the event with the
	// highest ts seen so far, which is not always this one.
	State RecordingEventName `json:"state" required:"true"`
	// Failed is true when the recording was deleted without ever being
	// stored; Reason then says why.
	Failed bool   `json:"failed" required:"true"`
	Reason string `json:"reason,omitempty"`
}

// Validate reports every rule the notice breaks.
func (n RecordingNotice) Validate() error {
	var errs []error
	errs = append(errs, validateID("recordingId", n.RecordingID))
	if !n.Event.Known() {
		errs = append(errs, fmt.Errorf("unknown event %q", n.Event))
	}
	if !n.State.Known() {
		errs = append(errs, fmt.Errorf("unknown state %q", n.State))
	}
	if n.TS <= 0 {
		errs = append(errs, fmt.Errorf("ts %d is not positive", n.TS))
	}
	if n.Failed && n.Reason == "" {
		errs = append(errs, errors.New("reason is required when failed"))
	}
	return errors.Join(errs...)
}

// UnmarshalJSON checks the notice's shape as the schema does.
func (n *RecordingNotice) UnmarshalJSON(data []byte) error {
	obj, err := decodeObject(data)
	if err != nil {
		return err
	}
	var out RecordingNotice
	errs := []error{
		requireKeys(obj, "recordingId", "event", "ts", "state", "failed"),
		decodeString(obj, "recordingId", &out.RecordingID),
		decodeString(obj, "event", (*string)(&out.Event)),
		decodeTS(obj, "ts", &out.TS),
		decodeString(obj, "state", (*string)(&out.State)),
		decodeBool(obj, "failed", &out.Failed),
		decodeString(obj, "reason", &out.Reason),
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*n = out
	return nil
}

func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, errors.New("payload is not a JSON object")
	}
	return obj, nil
}

func requireKeys(obj map[string]json.RawMessage, keys ...string) error {
	var missing []string
	for _, k := range keys {
		if _, ok := obj[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing required field %s", strings.Join(missing, ", "))
	}
	return nil
}

// decodeString fills dst from obj[key] when present; null is refused, as
// the schema refuses it.
func decodeString(obj map[string]json.RawMessage, key string, dst *string) error {
	raw, ok := obj[key]
	if !ok {
		return nil
	}
	if bytes.Equal(raw, []byte("null")) || json.Unmarshal(raw, dst) != nil {
		return fmt.Errorf("%s is not a string", key)
	}
	return nil
}

func decodeBool(obj map[string]json.RawMessage, key string, dst *bool) error {
	raw, ok := obj[key]
	if !ok {
		return nil
	}
	if bytes.Equal(raw, []byte("null")) || json.Unmarshal(raw, dst) != nil {
		return fmt.Errorf("%s is not a boolean", key)
	}
	return nil
}

// decodeTS accepts any JSON number with no fraction (1e12 and 5.0 are
// integers to JSON Schema), as long as it fits an int64.
func decodeTS(obj map[string]json.RawMessage, key string, dst *int64) error {
	raw, ok := obj[key]
	if !ok {
		return nil
	}
	var n json.Number
	// json.Number also takes a quoted number, which the schema refuses.
	if raw[0] == '"' || json.Unmarshal(raw, &n) != nil || n == "" {
		return fmt.Errorf("%s is not a number", key)
	}
	if i, err := n.Int64(); err == nil {
		*dst = i
		return nil
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= math.MaxInt64 {
		return fmt.Errorf("%s %s is not an integer", key, n)
	}
	*dst = int64(f)
	return nil
}
