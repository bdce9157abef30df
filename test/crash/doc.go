// Package crash is the crash-consistency harness for summarize-session,
// for remote functions and for functions ordered per key: it reproduces
// the field report's kill matrix against the shipped binary.
//
// A Harness builds `jetfn run` once, owns an embedded nats-server and an
// embedded Mongo-compatible server (which outlive every child), and starts
// the binary as a child process that reaches NATS through a Proxy and Mongo
// through a Relay. The Proxy reads the client side of the NATS protocol, so
// it can tell the transcript.processed publish from a $JS.ACK ack and pass,
// drop or freeze either; the binary has no test hooks.
//
// Each single-session run writes its own manifest and uses its own
// database, seeds segments into Mongo, publishes session-ended straight to
// the server, SIGKILLs the child at its Point, restarts it, and waits until
// the consumer has acked everything; then it counts summaries (documents in
// transcriptsummaries) and notifications (transcript.processed messages in
// the stream). One point also restarts nats-server during the child's
// outage. Careless publishes sessions with the summary key as their
// session-ended message ID; Exhaustion kills the child in every allowed
// delivery of one session and checks its dead letter. The remote points run
// a remote function instead (the Go example, a micro service behind a
// proxy of its own that holds its reply): one request, the remote or jetfn
// SIGKILLed once the remote has stored its document, and one document and
// one output with jetfn's scoped message ID wanted after the restart.
// Batches put many sessions in flight and kill the child, restart
// nats-server or take Mongo away at random moments. The ordered rows
// (ordered.go) run a function ordered per key (a subject token) whose
// remote, the harness's order recorder, records each key's effects with
// the input's stream sequence; with jetfn SIGKILLed at random moments, a
// second instance joining and one leaving, or one message failing k
// times, the order checker (ordercheck.go) wants every key's effects in
// stream order, each once. The routed rows (routed.go) key the function
// by a header (or a payload field) instead, so that jetfn's own router
// copies the input into the keyed stream, and SIGKILL or stop the routing
// instance right after a random copy of a burst, while copies are in
// flight and unacknowledged; one of them adds a message without its key,
// which must be dead-lettered once. The scheduled row (scheduled.go) runs
// the recorder as a function triggered every second by its schedule and
// SIGKILLs jetfn in the middle of ticks, with each tick's effect applied
// and its ack held: every tick that ran must have its effect and output
// once, and every tick stored outside a disruption must have run. The
// debounced row (debounced.go) runs it debounced per key and SIGKILLs
// jetfn while bursts are published and while their runs come due: every
// burst's last message must take effect once, with its output. The
// rewound row (rewound.go) handles the ordered rows' messages with it
// unkeyed, rewinds it to the first with `jetfn rewind` and SIGKILLs
// jetfn during the replay: every message must run again and still take
// effect once, with one output. (A
// nats-server node killed in a 3-node cluster, as test/chaos does, is not
// among them yet.) RunSuite runs them all and returns the Report that
// `go run ./test/crash/cmd/crashtest` prints.
package crash
