// Package publishrecordingevent is the publish-recording-event function: it
// records the backend's recording events (recording.<event>) in Mongo and
// tells everyone in the call, on conversation.<conversationId>.recording.
//
// For each event it decodes the payload with events.RecordingEventPayload
// (one its schema refuses is dead-lettered, never retried, with every
// problem as the reason), counts it into the recording's document, stores
// it in the timeline and publishes the notice, with
// <recordingId>:<event>:<ts> as the timeline _id and the Nats-Msg-Id.
// eventCount counts distinct events: the document keeps the key of every
// event it counted, and the increment happens only in the update that adds
// the key, so a redelivery, a replay or a republished copy of an event is
// never counted again, however its run interleaves with the first one.
//
// FerretDB has no transactions, so the recording document is kept right by
// single-document updates that are each idempotent and commutative (see
// store.go): a redelivery, a duplicate or an older event arriving late
// leaves the same document as one in-order delivery, whatever the
// concurrency, on MongoDB, which applies each update atomically (FerretDB
// does not: with it, order the function by recordingId, as the shipped
// manifests do, or run one instance; see recordingLocks). A crash between
// steps is repaired by the redelivery, which runs every step again.
package publishrecordingevent
