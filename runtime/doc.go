// Package runtime runs jetfn functions on JetStream.
//
// A Runtime takes a validated Manifest and the compiled-in functions, and
// its Run does, in order: create or update every stream; create or update
// each function's durable pull consumer and construct its Handler; register
// one NATS micro service per function and watch its max-deliveries
// advisories; then pull and handle messages until the context is done.
//
// Each message's handler runs with a heartbeat (InProgress) and its result
// picks the acknowledgement, as documented on Handler. On shutdown the
// runtime stops pulling, lets in-flight handlers finish up to the drain
// timeout, and returns what is left to the stream for another instance.
//
// The package knows nothing about any particular function: functions see
// only Handler, Msg, Deps and the error helpers.
package runtime
