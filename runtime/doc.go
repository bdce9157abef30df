// Package runtime is jetfn's executor: it runs the functions a manifest
// binds on JetStream.
//
// A Runtime takes a validated manifest.Manifest and the compiled-in
// jetfn.Functions, and its Run does, in order: create or update every
// stream and each function's durable pull consumer (reconcile.go);
// construct each Handler and register one NATS micro service per function
// (service.go); then pull and handle messages until the context is done,
// watching each consumer (consumerwatch.go: a deleted one is recreated, or
// reported while provisioning is off). Apply switches to a new manifest
// revision all or nothing (apply.go).
//
// One delivery's life reads top to bottom in delivery.go: it arrives on
// the puller's subscription, is held, handed to a worker or the buffer,
// run, and settled (Ack, retry, dead letter) or returned. Around it, each
// in its own file: pull.go asks JetStream for messages on one long-lived
// subscription per function; flow.go counts the credits that bound what a
// binding pulls and holds, and sizes the prefetch; keepalive.go sends the
// InProgress that keeps held messages alive and abandons a handler past
// its timeout; workers.go starts and replaces the handler goroutines;
// ackreply.go reads a delivery's metadata from its reply subject;
// deadletter.go is the dead letter's shape; attempts.go counts handler
// runs for maxDeliver; ratelimit.go paces a function's pulls, keyrate.go
// each key of a keyed function (keyed.go) before its run; runcontext.go is the context a handler runs with;
// binding.go wires one function's puller, keeper and workers together;
// tracing.go is the OpenTelemetry seam: a span per handler run and per
// output, only with WithTracerProvider. A handler's result picks the
// acknowledgement as documented on jetfn.Handler. A remote function's
// handler (remote.go) is one NATS request per delivery to a micro
// endpoint, whose reply remote_reply.go maps to that same result;
// remotewatch.go tracks whether the endpoint has responders, for /readyz.
// On shutdown the runtime stops pulling, lets in-flight handlers finish up
// to the drain timeout, and returns what is left to the stream for another
// instance.
//
// The package knows nothing about any particular function: functions see
// only package jetfn.
package runtime
