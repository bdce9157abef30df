// Package bench measures what the jetfn runtime costs over hand-written
// JetStream code, end to end, with both sides run by the same harness.
//
// Run walks a grid of cases (workload × concurrency × message size) and, for
// each, runs repetitions interleaved between the baseline and jetfn, so any
// drift of a shared machine hits both. Every repetition gets a fresh
// embedded nats-server and runs its consumer in a child process (this
// binary re-executed, see RunIfChild), so peak RSS and allocation counts
// belong to one variant and no backlog carries over. The parent publishes
// and times: it stamps each publish and watches the consumer's acks on
// $JS.ACK.> (see load.go), which measures both variants the same way
// without touching their code. The drain case stores its whole backlog
// before the child starts and times the consumer from its first ack to
// the server's ack floor at the last message (see drain.go).
//
// Results come back as a Report: one row per case with medians and the
// jetfn/baseline ratios, printable as a text table or a Markdown table, and
// drawable as a PNG chart (gonum.org/v1/plot).
package bench
