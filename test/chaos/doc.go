// Package chaos checks the R3 promise under real faults: three
// nats-server processes (built from the pinned module, routes between
// them, each on its own store, sync_interval of the caller's choice), the
// streams of manifests/production.yaml, two or more `jetfn run` processes
// with every node's URL, and a publisher that ends a session at a steady
// rate and retries an unacknowledged session-ended with the same message
// ID, as the transcriber does.
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
// times come from the stored notifications' timestamps.
//
// TestChaos is the short version; `go tool task chaos` (cmd/chaostest)
// runs at least ten faults of each kind.
package chaos
