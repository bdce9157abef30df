// Package chaos checks the R3 promise under real faults: three
// nats-server processes (built from the pinned module, routes between
// them, each on its own store, sync_interval of the caller's choice), the
// streams of manifests/production.yaml, two or more `jetfn run` processes
// with every node's URL, and a publisher that ends a session at a steady
// rate and retries an unacknowledged session-ended with the same message
// ID, as the transcriber does. Meanwhile a second, careful publisher plays
// the recording backend: it publishes the nine events of each of a number
// of recordings (increasing ts, a Nats-Msg-Id each) in order, in bursts of
// three, the next only once the last was acknowledged, for
// publish-recording-event, which production.yaml orders by recordingId.
//
// Run injects faults one after another, cycling through the Kinds: SIGKILL
// of the stream leader's node, of the consumer leader's, of any node, a
// SIGSTOP of the stream leader's node longer than the election timeout, a
// SIGKILL with an immediate restart on the same store, and a jetfn
// instance SIGKILLed while a node is down. Leaders are found through the
// JetStream API (stream and consumer info); a fault is over when every
// node's /healthz answers 200 again. Once the publisher stops and the
// consumer settles, every session is classified like Jepsen does: an
// acknowledged session-ended must end as exactly one summary and one
// transcript.processed; a loss is looked up in the stream to tell NATS's
// loss from jetfn's; an unacknowledged one is unknown. Stalls and recovery
// times come from the stored notifications' timestamps. Every recording
// event is checked too: an acknowledged one must have exactly one notice in
// NOTIFICATIONS (by the Nats-Msg-Id the function gives it), and the notices
// of one recording must be stored in the order RECORDING stored its events
// (the sequence of each ID's first storage); one that is not is "out of
// order". Options.KeyConcurrency runs the function unordered instead, to
// see that check fail.
//
// TestChaos is the short version; `go tool task chaos` (cmd/chaostest)
// runs at least ten faults of each kind.
package chaos
