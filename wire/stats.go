package wire

import "time"

// Stats is a snapshot of one function's counters in this process. It is the
// body of the `<function>.status` endpoint and the data of `nats micro stats`.
type Stats struct {
	Function string `json:"function"`
	Handled  uint64 `json:"handled"`
	Acked    uint64 `json:"acked"`
	// Retried counts Naks: a failed attempt given back with its backoff
	// delay, or a message a drain returned for another instance.
	Retried      uint64 `json:"retried"`
	Termed       uint64 `json:"termed"`
	DeadLettered uint64 `json:"dead_lettered"`
	// DeadLetterFailures counts dead letters the dead-letter stream did not
	// store (an outage, a refusal, an ID it holds for another message): the
	// message was kept and retried on the backoff, never Term'd.
	DeadLetterFailures uint64 `json:"dead_letter_failures"`
	Redeliveries       uint64 `json:"redeliveries"`
	Heartbeats         uint64 `json:"heartbeats"`
	// BufferBeats are heartbeats for pulled messages still waiting for a
	// worker.
	BufferBeats   uint64  `json:"buffer_heartbeats"`
	InFlight      int64   `json:"in_flight"`
	LastError     string  `json:"last_error,omitempty"`
	AvgMillis     float64 `json:"processing_avg_ms"`
	P50Millis     float64 `json:"processing_p50_ms"`
	P99Millis     float64 `json:"processing_p99_ms"`
	NumPending    uint64  `json:"num_pending"`
	NumAckPending int     `json:"num_ack_pending"`
	// PendingStale says the two above are the last the consumer's info
	// answered, since it did not answer now (a failover of its leader).
	PendingStale bool `json:"pending_stale,omitempty"`
	// ManifestRefused says why the runtime refused the last manifest
	// revision it was given; it keeps running the previous one.
	ManifestRefused string `json:"manifest_refused,omitempty"`
	// Revision is the deployment revision the instance runs (jetfn run
	// --deployment); 0 for a manifest file. ManifestDigest is the digest of
	// the manifest it runs now (its micro metadata keeps the one the
	// function was bound with).
	Revision       uint64 `json:"revision,omitempty"`
	ManifestDigest string `json:"manifest_digest,omitempty"`
	// DuplicateOutputs counts outputs the stream acknowledged as duplicates
	// (PubAck duplicate): expected for a retry, suspicious for a first
	// delivery, which is also logged.
	DuplicateOutputs uint64 `json:"duplicate_outputs"`
	// Abandoned counts handler runs that outlived the function's timeout:
	// their messages were settled as failures and their workers replaced.
	// AbandonedRunning is how many of those have not returned yet.
	Abandoned        uint64 `json:"abandoned"`
	AbandonedRunning int64  `json:"abandoned_running"`
	// Concurrency is the function's worker count, to read the two above.
	Concurrency int `json:"concurrency"`
	// RateLimit is the function's rateLimit ("100/s"), if it has one;
	// RateHeld how many pulled messages wait for their turn (the rest of
	// what the rate holds back is NumPending).
	RateLimit string `json:"rate_limit,omitempty"`
	RateHeld  int64  `json:"rate_held,omitempty"`
	// KeyRateLimit is a keyed function's keyRateLimit ("5/s"), if it has
	// one; KeyRateDeferred counts the messages this instance sent back to
	// wait for their key's turn, KeyRateWaiting how many of those wait on
	// the server now.
	KeyRateLimit    string `json:"key_rate_limit,omitempty"`
	KeyRateDeferred uint64 `json:"key_rate_deferred,omitempty"`
	KeyRateWaiting  int64  `json:"key_rate_waiting,omitempty"`
	// Schedule is a scheduled function's schedule (its Nats-Schedule
	// pattern); TicksSkipped counts the ticks its missed: policy skipped.
	Schedule     string `json:"schedule,omitempty"`
	TicksSkipped uint64 `json:"ticks_skipped,omitempty"`
	// PausedUntil is set while the function is paused on the server
	// (`jetfn pause`): when the server resumes it by itself.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// Singleton is, for a singleton function, "active" on the instance
	// that pulls its messages now and "standby" on the others.
	Singleton string `json:"singleton,omitempty"`
	// ConsumerError is set while the function's durable consumer (or its
	// stream) is missing on the server; nothing is handled meanwhile.
	ConsumerError string `json:"consumer_error,omitempty"`
	// Remote is a remote function's endpoint subject; RemoteInstances how
	// many micro service instances the last discovery found serving it;
	// RemoteError is set while no instance responds (/readyz fails).
	Remote          string `json:"remote,omitempty"`
	RemoteInstances int    `json:"remote_instances,omitempty"`
	RemoteError     string `json:"remote_error,omitempty"`
	// A keyed function's figures (ordered or keyConcurrency). Partitions
	// and PerKey are as declared. KeysActive is how many partitions have a
	// message in flight, on any instance; HeldByKey how many stored
	// messages wait behind those (held back by their key's order or
	// limit). StuckKeys are the keys whose head message failed on this
	// instance and waits for its retry, holding its partition; OldestKey
	// is the key of the oldest message this instance holds, stored
	// OldestKeyWaitSeconds ago.
	Partitions           int        `json:"partitions,omitempty"`
	PerKey               int        `json:"per_key,omitempty"`
	KeysActive           int        `json:"keys_active,omitempty"`
	HeldByKey            uint64     `json:"held_by_key,omitempty"`
	StuckKeys            []StuckKey `json:"stuck_keys,omitempty"`
	OldestKey            string     `json:"oldest_key,omitempty"`
	OldestKeyWaitSeconds float64    `json:"oldest_key_wait_seconds,omitempty"`
	// Router is, for a keyed function whose key is in a header or a field,
	// "active" on the instance that copies its messages into partitions
	// and "standby" on the others; RouterPending is how many input
	// messages wait to be copied (also counted in NumPending).
	Router        string `json:"router,omitempty"`
	RouterPending uint64 `json:"router_pending,omitempty"`
	// Debounce is a debounced function's period; DebouncePending how many
	// input messages its debouncer has not taken yet (also counted in
	// NumPending), and DueRuns how many runs came due and wait for the
	// handler (NumPending of its consumer on the debounce stream).
	Debounce        string `json:"debounce,omitempty"`
	DebouncePending uint64 `json:"debounce_pending,omitempty"`
	DueRuns         uint64 `json:"due_runs,omitempty"`
}

// StuckKey is a key whose head message failed and holds its partition
// until it succeeds or is dead-lettered.
type StuckKey struct {
	Key       string `json:"key"`
	Partition int    `json:"partition"`
	// Deliveries is how many times the head message was delivered.
	Deliveries uint64    `json:"deliveries"`
	LastError  string    `json:"last_error"`
	Since      time.Time `json:"since"`
}
