// Package dlq lists, shows and replays the dead letters the runtime stored
// (see runtime/deadletter.go), for `jetfn dlq`.
//
// Dead letters are read by sequence with the stream's message-get API, one
// request each, so listing needs no consumer and leaves nothing behind.
//
// A replay republishes the original payload and headers (minus the runtime's
// Jetfn-* headers and the dead letter's Nats-Msg-Id) to the original subject
// under the new message ID <original-id>:replay:<n>, so the original
// stream's duplicate window, which still remembers <original-id>, does not
// drop it. The dead letter is deleted only after the stream acknowledged the
// publish. Each replay is recorded in the KV bucket jetfn-dlq-replays under
// the dead letter's <stream>.<sequence>, created first as a claim (a
// compare-and-set, so two operators cannot replay the same dead letter at
// once) and marked replayed once the publish is acknowledged. The record is
// what refuses a second replay of the same dead letter without --force: the
// dead letter itself is gone by then, or, if deleting it failed, still there
// and indistinguishable from one never replayed. A claim whose publish was
// never confirmed is resumed with the same n: the same message ID makes the
// retry a no-op if the first publish did land.
package dlq
