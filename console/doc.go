// Package console serves jetfn's web console: the functions a stack runs
// (their instances, revisions, rates, latencies, counters and consumer
// backlog), each function's recent runs, the dead letters and the
// deployment's revisions, with the operator actions the CLI has (replay,
// rollback), each behind a confirmation and written to the log.
//
// Everything it shows comes from what jetfn and the server already know:
// micro discovery ($SRV.STATS, through ops/status), each instance's runs
// endpoint (runtime/runs.go), consumer info (a JetStream API request, which
// the consumer's leader answers), the dead-letter stream (ops/dlq) and the
// deployment's KV history (deploy). It keeps nothing of its own but a
// short history of rates and the progress of its replays.
//
// Lifecycle: New checks the settings; Run serves on a listener until its
// context ends, polling the stack every interval meanwhile, and waits for
// the replays it started. Without a token (WithToken) it is read-only:
// every action is refused. With one, an action needs a session from the
// login page (or the token as a bearer header), a CSRF token bound to that
// session, and a same-origin request; it is logged as an audit line.
package console
