// Package wire is jetfn's wire contract with the tools around it: the
// headers of dead letters and of remote functions' requests, the JSON of a
// function's status endpoint (Stats) and of its runs endpoint (Run). The
// runtime writes these and the ops tools, the console and the metrics read
// them; a tool in another language reads the same names. It imports
// nothing of the runtime, so a tool that reads the wire builds without it.
package wire

// Headers the runtime adds to a dead letter, beside the original's own.
const (
	HeaderFunction        = "Jetfn-Function"
	HeaderOriginalSubject = "Jetfn-Original-Subject"
	HeaderOriginalStream  = "Jetfn-Original-Stream"
	HeaderStreamSequence  = "Jetfn-Stream-Sequence"
	HeaderNumDelivered    = "Jetfn-Num-Delivered"
	HeaderError           = "Jetfn-Error"
	// HeaderOriginalMsgID keeps the original Nats-Msg-Id, which the dead
	// letter's own ID replaces.
	HeaderOriginalMsgID = "Jetfn-Original-Msg-Id"
	// HeaderMsgID is the identity the function saw (jetfn.Msg.ID): a replay
	// hands the copy to the function under it (jetfn.HeaderReplayOf).
	HeaderMsgID = "Jetfn-Msg-Id"
	// HeaderOriginalStreamIdentity names the incarnation of the original
	// stream (streamIdentity), which its sequence alone does not.
	HeaderOriginalStreamIdentity = "Jetfn-Original-Stream-Identity"
	// HeaderScope is the name the dead letter's ID is scoped by: the
	// function's, or the one it was first created under (scope.go).
	HeaderScope = "Jetfn-Scope"
	// HeaderPayloadOmitted, on a dead letter stored without the original's
	// payload, is the payload's size in bytes: with the dead letter's
	// headers it was larger than the server or the dead-letter stream
	// takes. The original stream and sequence say where it is.
	HeaderPayloadOmitted = "Jetfn-Payload-Omitted"
	// HeaderOriginalPrefix prefixes every Nats-* header of the original but
	// its Nats-Msg-Id: the server acts on those (Nats-TTL, Nats-Rollup,
	// Nats-Incr, Nats-Expected-*, Nats-Schedule, …), and the dead-letter
	// stream would apply them to the copy or refuse it. Under this prefix a
	// person still reads them, and a replay leaves them out.
	HeaderOriginalPrefix = "Jetfn-Original-"
)

// The headers jetfn adds to a remote function's request, beside the
// message's own (HeaderFunction, Jetfn-Function, is the first).
const (
	HeaderRemoteStream    = "Jetfn-Stream"
	HeaderRemoteStreamSeq = "Jetfn-Stream-Seq"
	HeaderRemoteDelivery  = "Jetfn-Delivery"
	HeaderRemoteSubject   = "Jetfn-Subject"
	// HeaderRemoteMsgID is the input's idempotency key (jetfn.Msg.ID), the
	// same on every redelivery: the remote keys its own effects by it.
	HeaderRemoteMsgID = HeaderMsgID
	// HeaderRemoteDeadline is when jetfn stops waiting for the reply, RFC
	// 3339 UTC with milliseconds: remoteReplyMargin before the run's own
	// timeout, so a reply that comes in time leaves room to publish its
	// outputs.
	HeaderRemoteDeadline = "Jetfn-Deadline"
)

// HeaderRetryAfter on a 429 or 503 error reply is how long the remote
// asks jetfn to wait before the redelivery, in seconds (2, 0.5).
const HeaderRetryAfter = "Retry-After"

// FunctionMetadataKey is the consumer metadata key in which the runtime
// names the function a consumer serves: its durable, partitions, router
// and backfills. `jetfn pause` finds a function's consumers by it.
const FunctionMetadataKey = "jetfn.function"

// RoleMetadataKey marks, with RoleRouter, the consumers of a keyed
// function that only copy its messages into its partitions (the router
// and the router's backfills): `jetfn pause` leaves them running.
const (
	RoleMetadataKey = "jetfn.role"
	RoleRouter      = "router"
)
