// Package opscheck is a randomized, seeded operations-and-faults checker
// for jetfn, in the spirit of Jepsen: where the crash, chaos and scale
// harnesses each exercise one action at a time, it interleaves the
// operator's actions with faults and checks every input's promise at the
// end.
//
// One seed decides a Schedule (Generate): publishes on three lanes, by
// careful publishers (a unique Nats-Msg-Id, retried until a PubAck) and
// careless ones (no ID, the same payload sent twice, an old message sent
// again), some of them poison (a payload the function refuses, an empty
// body); and, one after the other, the nemesis's operations: SIGKILL and
// SIGSTOP of jetfn instances, SIGKILL of a NATS node, a Mongo outage,
// live deploys of random valid revisions (ackWait, filter subjects,
// concurrency, the remote function or its durable renamed, a function
// removed), rollbacks, consumer deletion (for the keyed function, its
// router's and partitions' consumers at once; also while every instance is
// down), deletion of an input stream, `jetfn dlq replay`, SIGKILL of the
// remote function's process and a one-way partition of it (its replies
// held).
//
// The system (system.go) is real processes: one nats-server (or test/chaos's
// three-node cluster with R3 streams), FerretDB embedded and restarted on
// the same address and data behind a relay, the remote example
// (examples/remote-go, which keys its document and its output by
// Jetfn-Msg-Id) behind proxies that can hold its replies, and N `jetfn run
// --deployment` instances under a supervisor. The functions are the remote
// one and publish-recording-event (its effects keyed by the event's
// content), which every revision orders by the payload's recordingId as the
// shipped manifests do: a field key, so jetfn's router copies the input
// into 16 partitions. The recording inputs are the events of four
// recordings, round robin. Every input carries a unique token in a header
// and in its payload (a recording event's ts is the input's number), so
// each document, output and dead letter is traced back to exactly one
// input.
//
// Run records a History (every operation with its start, end and outcome,
// every dead letter as it is stored, every replay), then settles: faults
// end, the base revision is deployed again, and the dead letters of good
// inputs are replayed, within a bound. The check (check.go) wants, per
// input: as many effects and outputs as it has identities (one for an input
// with a message ID or one keyed by content, one per stored copy
// otherwise), exactly one dead letter per stored copy of a poison input
// and per replay of it, nothing silently skipped, each recording's event
// count equal to its distinct events, the notices of one recording in the
// order its events were stored in the input stream (order.go says exactly
// which inputs that binds), and the whole system settled in bounded time. A failure prints the seed, the command that
// replays it, and for each kind of violation the inputs with their evidence
// and a minimal history (Result.Report).
//
// TestOpsCheck is the short run in the suite; cmd/opscheck the long one
// (`go tool task opscheck`).
package opscheck
