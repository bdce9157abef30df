package runtime

import "time"

// DefaultMaxPrefetch caps the derived prefetch allowance; it is nats.go's
// own default buffer for Consume.
const DefaultMaxPrefetch = 500

// maxPrefetch is the most messages the buffer may hold beyond the workers.
func (b *binding) maxPrefetch() int {
	if b.spec.Prefetch != nil {
		return *b.spec.Prefetch
	}
	return DefaultMaxPrefetch
}

// prefetch is the current allowance for messages waiting for a worker. A
// manifest value is used as is. Otherwise it is derived from the measured
// handling rate so that the last buffered message is expected to wait about
// a quarter of ackWait, well under the half that the issue asks for, and the
// buffer keeper's heartbeats cover the rest. Before anything is measured the
// allowance equals concurrency.
func (b *binding) prefetch() int {
	if b.spec.Prefetch != nil {
		return *b.spec.Prefetch
	}
	avg := b.stats.recentAverage()
	if avg <= 0 {
		return b.spec.Concurrency
	}
	perSecond := float64(b.spec.Concurrency) / avg.Seconds()
	n := int(perSecond * (b.spec.AckWait / 4).Seconds())
	return min(max(n, 0), DefaultMaxPrefetch)
}

// recentAverage is an exponentially weighted average of processing times,
// cheap enough to read before every pull.
func (c *counters) recentAverage() time.Duration {
	return time.Duration(c.ewma.Load())
}
