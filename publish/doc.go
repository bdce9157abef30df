// Package publish is for services outside jetfn that feed it: the
// transcriber and the backend stay plain NATS publishers, and this package
// gives them the rules those publishers must keep. A publish is a no-op
// without NATS_URL, never panics, logs and returns its error, waits a
// bounded time, and always carries a Nats-Msg-Id so a retry is dropped by
// the stream instead of stored twice. A publish made under a span (the ctx
// the caller passes) carries it in a W3C traceparent header, so the
// function that takes the event continues the caller's trace.
package publish
