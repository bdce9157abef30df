// Package runtime runs jetfn functions on JetStream.
//
// A Runtime takes a validated Manifest and the compiled-in functions, and
// its Run does, in order: create or update every stream; create or update
// each function's durable pull consumer and construct its Handler; register
// one NATS micro service per function; then pull and handle messages until
// the context is done, watching each consumer (a deleted one is recreated,
// or reported while provisioning is off).
//
// Each message's handler runs with a heartbeat (InProgress) within the
// function's timeout, and its result picks the acknowledgement, as
// documented on Handler; a delivery past maxDeliver is dead-lettered
// without running the handler. On shutdown the
// runtime stops pulling, lets in-flight handlers finish up to the drain
// timeout, and returns what is left to the stream for another instance.
//
// The package knows nothing about any particular function: functions see
// only Handler, Msg, Deps and the error helpers.
package runtime
