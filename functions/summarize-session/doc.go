// Package summarizesession is the summarize-session function: it turns a
// finished transcript session into one summary document and one
// transcript.processed event.
//
// For each transcription.session-ended event it waits for late segments
// (count, wait the quiet period, count again, until two counts match or
// maxRounds have passed), loads the segments in order, builds the summary,
// upserts it into transcriptsummaries and publishes transcript.processed.
// The two steps with side effects come last and both are idempotent (an
// upsert on <conversationId>:<sessionId>, and a publish with that key as
// Nats-Msg-Id), so a redelivery after a crash at any point simply runs the
// handler again from the top.
package summarizesession
