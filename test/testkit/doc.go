// Package testkit holds what the process-level harnesses (test/crash,
// test/scale, test/chaos) share: building the jetfn binary (or the pinned
// nats-server) and running it as a child process, reserving loopback
// ports, joining a cluster's client URLs as NATS_URL takes them, closing a
// harness's own NATS and Mongo clients, asking JetStream which servers
// lead a stream and a consumer, counting the outcomes of summarize-session
// (summaries in Mongo, transcript.processed messages in the stream), and
// retrying a read that a restart or a leader election makes fail for a
// moment (Retry): a read a test makes once, rather than polls, goes
// through it.
package testkit
