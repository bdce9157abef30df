// Package summarizesession is the summarize-session function: it turns a
// finished transcript session into one summary document and one
// transcript.processed event.
//
// For each transcription.session-ended event it waits for late segments
// (count, wait the quiet period, count again, until two counts match or
// maxRounds have passed), loads the segments in order, builds the summary,
// inserts it into transcriptsummaries unless the session has one, and
// publishes transcript.processed from the summary stored. The two steps
// with side effects come last and both are idempotent (an insert on
// <conversationId>:<sessionId>, and a publish with that key as
// Nats-Msg-Id), so a redelivery after a crash at any point simply runs the
// handler again from the top.
//
// The first summary stored for a session is final: a later run (a
// redelivery, session-ended published again, a dead letter replayed) that
// sees more segments still announces and keeps the stored one, so the
// summary and its transcript.processed always agree. A segment saved after
// the summary is not in it. A summary deleted by hand is made again by the
// next run, but that run's transcript.processed is dropped by the stream
// while the first one's message ID is inside its duplicate window.
package summarizesession
