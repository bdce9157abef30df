// Package simulate plays jetfn's external publishers against a running
// stack (NATS_URL, MONGO_URI), so `jetfn simulate ...` can exercise the
// functions end to end without the real services.
//
// Call plays the transcriber: it saves and publishes a scripted
// conversation's segments through package publish, some of them after
// session-ended (late segments), waits for transcript.processed and prints
// the stored summary. Each run uses fresh conversation and session IDs, so
// it never collides with earlier runs on the same stack. A simulation owns
// the connections it opens and closes them before it returns.
//
// Recording plays the backend's recording events and prints the notices
// in the order the backend published them. Summaries lists what
// summarize-session stored, so the results can be read without a Mongo
// client.
package simulate
