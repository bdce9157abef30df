package publish

import "errors"

// ErrNoMsgID is returned for a publish without a message ID: every event
// needs one, or a publisher retry stores it twice.
var ErrNoMsgID = errors.New("publish: a message ID is required")

// ErrNoDatabase is returned by NewTranscriber without a database.
var ErrNoDatabase = errors.New("publish: the transcriber needs a Mongo database")

// ErrNoTS is returned by Backend.RecordingEvent for an event whose ts is
// zero. ts is part of the event's Nats-Msg-Id, so a ts filled in at
// publish time would differ on every retry and make each retry a new
// event; the caller sets it once, when the event happens, and retries with
// the same value.
var ErrNoTS = errors.New("publish: a recording event needs its ts (epoch ms, set once by the caller and kept across retries)")
