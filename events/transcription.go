package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Subjects of the TRANSCRIPTION stream, which captures transcription.> and
// transcript.> with a 24-hour duplicate window.
const (
	// SegmentSubject carries one finished Segment from the transcriber.
	SegmentSubject = "transcription.segment"
	// SessionEndedSubject carries SessionEnded when a transcript's last
	// WebSocket closes.
	SessionEndedSubject = "transcription.session-ended"
	// TranscriptProcessedSubject carries TranscriptProcessed once a
	// session's summary is stored.
	TranscriptProcessedSubject = "transcript.processed"
)

// Mongo collections shared by the transcriber and summarize-session.
const (
	// SegmentsCollection holds one Segment document per segment, _id SegmentKey.
	SegmentsCollection = "transcriptsegments"
	// SummariesCollection holds one Summary per session, _id SummaryKey.
	SummariesCollection = "transcriptsummaries"
)

// Segment is one finished piece of a transcript. It is both the
// transcription.segment payload and, with _id = SegmentKey, the document the
// transcriber stores in SegmentsCollection.
type Segment struct {
	ConversationID string `json:"conversationId" bson:"conversationId" required:"true"`
	SessionID      string `json:"sessionId" bson:"sessionId" required:"true"`
	// Index is the segment's 0-based position in its session.
	Index   int    `json:"index" bson:"index" required:"true"`
	Speaker string `json:"speaker" bson:"speaker" required:"true"`
	Text    string `json:"text" bson:"text" required:"true"`
	StartMs int64  `json:"startMs" bson:"startMs" required:"true"`
	EndMs   int64  `json:"endMs" bson:"endMs" required:"true"`
}

// Key is the segment's document _id and Nats-Msg-Id.
func (s Segment) Key() string { return SegmentKey(s.SessionID, s.Index) }

// Validate reports every rule the segment breaks. It agrees with
// schemas/segment.schema.json. The schema cannot compare two fields, so
// neither does Validate: endMs before startMs is accepted by both.
func (s *Segment) Validate() error {
	errs := []error{
		validateID("conversationId", s.ConversationID),
		validateID("sessionId", s.SessionID),
		nonNegative("index", int64(s.Index)),
		nonNegative("startMs", s.StartMs),
		nonNegative("endMs", s.EndMs),
	}
	if s.Speaker == "" {
		errs = append(errs, errors.New("speaker: must not be empty"))
	}
	return errors.Join(errs...)
}

// UnmarshalJSON refuses a null field, as the schema does; encoding/json
// would leave the zero value.
func (s *Segment) UnmarshalJSON(data []byte) error {
	type plain Segment
	return decodeNoNulls(data, (*plain)(s))
}

// SessionEnded is the transcription.session-ended payload: the transcriber
// has finished a session and saved PublishedSegments segments. Some of them
// may still reach Mongo after this event.
type SessionEnded struct {
	ConversationID    string `json:"conversationId" required:"true"`
	SessionID         string `json:"sessionId" required:"true"`
	PublishedSegments int    `json:"publishedSegments" required:"true"`
}

// Validate reports every rule the event breaks; it agrees with
// schemas/session-ended.schema.json.
func (e *SessionEnded) Validate() error {
	return errors.Join(
		validateID("conversationId", e.ConversationID),
		validateID("sessionId", e.SessionID),
		nonNegative("publishedSegments", int64(e.PublishedSegments)),
	)
}

// UnmarshalJSON refuses a null field, as the schema does.
func (e *SessionEnded) UnmarshalJSON(data []byte) error {
	type plain SessionEnded
	return decodeNoNulls(data, (*plain)(e))
}

// TranscriptProcessed is the transcript.processed payload, published once
// the session's summary is stored, keyed by SummaryKey. Its Nats-Msg-Id is
// that key scoped by the runtime to the function and the subject:
// "jetfn:summarize-session:transcript.processed:<conversationId>:<sessionId>",
// so no ID an input publisher picks (a session-ended keyed
// "<conversationId>:<sessionId>", say) can make the stream drop it.
type TranscriptProcessed struct {
	ConversationID string `json:"conversationId" required:"true"`
	SessionID      string `json:"sessionId" required:"true"`
	Segments       int    `json:"segments" required:"true"`
	// Complete is whether every published segment was in the summary.
	Complete bool `json:"complete" required:"true"`
}

// Validate reports every rule the event breaks; it agrees with
// schemas/transcript-processed.schema.json.
func (e *TranscriptProcessed) Validate() error {
	return errors.Join(
		validateID("conversationId", e.ConversationID),
		validateID("sessionId", e.SessionID),
		nonNegative("segments", int64(e.Segments)),
	)
}

// UnmarshalJSON refuses a null field, as the schema does.
func (e *TranscriptProcessed) UnmarshalJSON(data []byte) error {
	type plain TranscriptProcessed
	return decodeNoNulls(data, (*plain)(e))
}

// Summary is the document summarize-session stores in SummariesCollection,
// one per session: a second run replaces it.
type Summary struct {
	ID                string `bson:"_id" json:"_id"`
	ConversationID    string `bson:"conversationId" json:"conversationId"`
	SessionID         string `bson:"sessionId" json:"sessionId"`
	Segments          int    `bson:"segments" json:"segments"`
	PublishedSegments int    `bson:"publishedSegments" json:"publishedSegments"`
	Complete          bool   `bson:"complete" json:"complete"`
	// WordsPerSpeaker counts whitespace-separated words, keyed by
	// SpeakerKey(speaker).
	WordsPerSpeaker map[string]int `bson:"wordsPerSpeaker" json:"wordsPerSpeaker"`
	// LongestTurns holds up to three turns, longest (in words) first.
	LongestTurns []Turn `bson:"longestTurns" json:"longestTurns"`
	// Questions are the segment texts that end in a question mark, in order.
	Questions []string  `bson:"questions" json:"questions"`
	UpdatedAt time.Time `bson:"updatedAt" json:"updatedAt"`
}

// Turn is a maximal run of consecutive segments by one speaker, joined.
type Turn struct {
	Speaker    string `bson:"speaker" json:"speaker"`
	Text       string `bson:"text" json:"text"`
	FirstIndex int    `bson:"firstIndex" json:"firstIndex"`
}

// SpeakerKey is a speaker's name as a key of Summary.WordsPerSpeaker. Mongo
// (and FerretDB) refuse a key that holds '.' or starts with '$', and names
// like "Dr. Okafor" do, so those become the full-width U+FF0E and U+FF04, as
// MongoDB's documentation suggests. Other names are unchanged.
func SpeakerKey(speaker string) string {
	key := strings.ReplaceAll(speaker, ".", "\uff0e")
	if strings.HasPrefix(key, "$") {
		key = "\uff04" + key[1:]
	}
	return key
}

// SegmentKey is a segment's document _id and Nats-Msg-Id:
// "<sessionId>:<index>". Session IDs are therefore unique across
// conversations.
func SegmentKey(sessionID string, index int) string {
	return sessionID + ":" + strconv.Itoa(index)
}

// SessionEndedKey is the Nats-Msg-Id of a session-ended event:
// "<conversationId>:<sessionId>:ended".
func SessionEndedKey(conversationID, sessionID string) string {
	return SummaryKey(conversationID, sessionID) + ":ended"
}

// SummaryKey is a summary's _id and the key of its transcript.processed
// event: "<conversationId>:<sessionId>" (see TranscriptProcessed for the
// Nats-Msg-Id built from it).
func SummaryKey(conversationID, sessionID string) string {
	return conversationID + ":" + sessionID
}

// validateID enforces the rule for conversation and session IDs: non-empty,
// and free of NATS subject tokens (. * >) and whitespace, so an ID can
// become a subject token or a key without escaping. Whitespace is
// unicode.IsSpace, which the schemas' pattern lists character by character.
func validateID(field, id string) error {
	if id == "" {
		return fmt.Errorf("%s: must not be empty", field)
	}
	if i := strings.IndexFunc(id, isBadIDRune); i >= 0 {
		return fmt.Errorf("%s: %q holds %q; IDs may not hold . * > or whitespace", field, id, []rune(id[i:])[0])
	}
	return nil
}

func isBadIDRune(r rune) bool {
	return r == '.' || r == '*' || r == '>' || unicode.IsSpace(r)
}

func nonNegative(field string, n int64) error {
	if n < 0 {
		return fmt.Errorf("%s: %d is negative", field, n)
	}
	return nil
}

// decodeNoNulls decodes data into v, a pointer to a struct, refusing null
// for any of the struct's JSON fields. Keys the struct does not know may hold
// anything, as the schemas allow additional properties.
func decodeNoNulls(data []byte, v any) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	var nulls []error
	for _, name := range jsonNames(reflect.TypeOf(v).Elem()) {
		if raw, ok := fields[name]; ok && string(raw) == "null" {
			nulls = append(nulls, fmt.Errorf("%s: must not be null", name))
		}
	}
	if err := errors.Join(nulls...); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
