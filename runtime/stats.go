package runtime

import (
	"slices"
	"sync/atomic"
	"time"
)

// durationWindow is how many recent processing times feed the average and
// p99; a window keeps the figures current and the memory fixed.
const durationWindow = 1024

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
	Redeliveries uint64 `json:"redeliveries"`
	Heartbeats   uint64 `json:"heartbeats"`
	// BufferBeats are heartbeats for pulled messages still waiting for a
	// worker.
	BufferBeats   uint64  `json:"buffer_heartbeats"`
	InFlight      int64   `json:"in_flight"`
	LastError     string  `json:"last_error,omitempty"`
	AvgMillis     float64 `json:"processing_avg_ms"`
	P99Millis     float64 `json:"processing_p99_ms"`
	NumPending    uint64  `json:"num_pending"`
	NumAckPending int     `json:"num_ack_pending"`
	// ManifestRefused says why the runtime refused the last manifest
	// revision it was given; it keeps running the previous one.
	ManifestRefused string `json:"manifest_refused,omitempty"`
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
	// ConsumerError is set while the function's durable consumer (or its
	// stream) is missing on the server; nothing is handled meanwhile.
	ConsumerError string `json:"consumer_error,omitempty"`
	// Remote is a remote function's endpoint subject; RemoteInstances how
	// many micro service instances the last discovery found serving it;
	// RemoteError is set while no instance responds (/readyz fails).
	Remote          string `json:"remote,omitempty"`
	RemoteInstances int    `json:"remote_instances,omitempty"`
	RemoteError     string `json:"remote_error,omitempty"`
}

// counters are a function's live counters, safe for concurrent use.
type counters struct {
	handled, acked, retried, termed atomic.Uint64
	deadLettered, redeliveries      atomic.Uint64
	heartbeats, bufferBeats         atomic.Uint64
	duplicateOutputs, abandoned     atomic.Uint64
	inFlight, abandonedRunning      atomic.Int64
	ewma                            atomic.Int64 // nanoseconds, see recentAverage
	lastError                       atomic.Pointer[string]

	// durations is a ring of the last processing times: observed counts
	// every one, and slot observed-1 mod the window holds the latest.
	// Lock-free, as every message of every worker writes it.
	durations [durationWindow]atomic.Int64
	observed  atomic.Uint64
}

func (c *counters) observe(d time.Duration) {
	i := c.observed.Add(1) - 1
	c.durations[i%durationWindow].Store(int64(d))
	for {
		old := c.ewma.Load()
		avg := time.Duration(old)
		if old == 0 {
			avg = d
		}
		if c.ewma.CompareAndSwap(old, int64(avg+(d-avg)/16)) {
			return
		}
	}
}

func (c *counters) setLastError(err error) {
	msg := err.Error()
	c.lastError.Store(&msg)
}

// snapshot copies the counters; consumer figures are filled in by the caller.
func (c *counters) snapshot(function string) Stats {
	s := Stats{
		Function:     function,
		Handled:      c.handled.Load(),
		Acked:        c.acked.Load(),
		Retried:      c.retried.Load(),
		Termed:       c.termed.Load(),
		DeadLettered: c.deadLettered.Load(),
		Redeliveries: c.redeliveries.Load(),
		Heartbeats:   c.heartbeats.Load(),
		BufferBeats:  c.bufferBeats.Load(),
		InFlight:     c.inFlight.Load(),

		DuplicateOutputs: c.duplicateOutputs.Load(),
		Abandoned:        c.abandoned.Load(),
		AbandonedRunning: c.abandonedRunning.Load(),
	}
	if p := c.lastError.Load(); p != nil {
		s.LastError = *p
	}
	s.AvgMillis, s.P99Millis = c.processingTimes()
	return s
}

func (c *counters) processingTimes() (avg, p99 float64) {
	n := int(min(c.observed.Load(), durationWindow))
	if n == 0 {
		return 0, 0
	}
	window := make([]time.Duration, n)
	for i := range window {
		window[i] = time.Duration(c.durations[i].Load())
	}
	slices.Sort(window)
	var sum time.Duration
	for _, d := range window {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return ms(sum / time.Duration(n)), ms(window[(n*99-1)/100])
}
