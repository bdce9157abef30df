package events

import (
	"strconv"
	"strings"
	"time"
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
// transcriber stores in SegmentsCollection. Its rules are those of
// schemas/segment.schema.json (SegmentPayload); neither compares two
// fields, so endMs before startMs is accepted.
type Segment struct {
	ConversationID string `json:"conversationId" bson:"conversationId"`
	SessionID      string `json:"sessionId" bson:"sessionId"`
	// Index is the segment's 0-based position in its session.
	Index   int    `json:"index" bson:"index"`
	Speaker string `json:"speaker" bson:"speaker"`
	Text    string `json:"text" bson:"text"`
	StartMs int64  `json:"startMs" bson:"startMs"`
	EndMs   int64  `json:"endMs" bson:"endMs"`
}

// Key is the segment's document _id and Nats-Msg-Id.
func (s Segment) Key() string { return SegmentKey(s.SessionID, s.Index) }

// SessionEnded is the transcription.session-ended payload: the transcriber
// has finished a session and saved PublishedSegments segments. Some of them
// may still reach Mongo after this event. Its rules are those of
// schemas/session-ended.schema.json (SessionEndedPayload).
type SessionEnded struct {
	ConversationID    string `json:"conversationId"`
	SessionID         string `json:"sessionId"`
	PublishedSegments int    `json:"publishedSegments"`
}

// TranscriptProcessed is the transcript.processed payload, published once
// the session's summary is stored, keyed by SummaryKey. Its Nats-Msg-Id is
// that key scoped by the runtime to the function and the subject:
// "jetfn:summarize-session:transcript.processed:<conversationId>:<sessionId>",
// so no ID an input publisher picks (a session-ended keyed
// "<conversationId>:<sessionId>", say) can make the stream drop it. Its
// rules are those of schemas/transcript-processed.schema.json
// (TranscriptProcessedPayload).
type TranscriptProcessed struct {
	ConversationID string `json:"conversationId"`
	SessionID      string `json:"sessionId"`
	Segments       int    `json:"segments"`
	// Complete is whether every published segment was in the summary.
	Complete bool `json:"complete"`
}

// Summary is the document summarize-session stores in SummariesCollection,
// one per session: the first run to store it wins, and a later run
// announces that one instead of its own, so the summary and its
// transcript.processed agree. UpdatedAt is when that first run built it.
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
