// Package publish is for services outside jetfn that feed it: the
// transcriber and the backend stay plain NATS publishers, and this package
// gives them the rules those publishers must keep. A publish is a no-op
// without NATS_URL, never panics, logs and returns its error, waits a
// bounded time, and always carries a Nats-Msg-Id so a retry is dropped by
// the stream instead of stored twice.
package publish
