// Package jetfn is what a function author codes against, and nothing more:
// Handler and Msg, the Deps a constructor gets (logger, config block,
// Publisher, Mongo), the error helpers that choose what happens to a
// message (Malformed, Permanent, RetryAfter), the payload contract
// (Payload: a JSON Schema that states every rule, and the Go type a handler
// gets; its PayloadError lists every problem in the payload's own terms)
// and the config-block decoder.
//
// It imports no NATS client. Package manifest describes which stream and
// consumer each function reads; package runtime is the executor that binds
// functions to JetStream, keeps messages alive, retries, dead-letters and
// drains. A function package imports jetfn only, so it builds and unit-tests
// without either of them (jetfntest has a recording Deps for that).
package jetfn
