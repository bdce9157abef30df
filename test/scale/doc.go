// Package scale tests jetfn beyond one process and one server.
//
// TestScaleOut builds `jetfn run` once and runs several instances of it as
// child processes with one manifest, so they share each function's durable
// consumer: the work is split between them, not copied. It checks that every
// session is summarized once and announced once, reports the split, then
// SIGKILLs one instance mid-batch and checks the others take its messages
// after the ack wait with no loss and no duplicate effect.
//
// TestClusterFailover runs the runtime in-process against a 3-node
// nats-server cluster (StartCluster) with R3 streams and consumers, stops the
// stream leader's server and then the consumer leader's while sessions keep
// arriving, and measures how long the function made no progress.
//
// SCALE_SESSIONS sets the scale-out batch size (default 300; `go tool task
// scale` runs 2,000).
package scale
