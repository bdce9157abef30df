package runtime

import (
	"errors"
	"time"
)

// outcomeKind is what the runtime tells JetStream about one delivery.
type outcomeKind int

const (
	outcomeAck outcomeKind = iota
	outcomeRetry
	outcomeDeadLetter
)

// outcome is the decision for one delivery: the kind, and for a retry the
// delay before the redelivery.
type outcome struct {
	kind  outcomeKind
	delay time.Duration
}

// retryPolicy is the part of a function's spec that decides retries.
type retryPolicy struct {
	maxDeliver int
	backoff    []time.Duration
	ackWait    time.Duration
}

// decide maps a handler's result to an outcome, as documented on Handler.
func decide(err error, numDelivered uint64, p retryPolicy) outcome {
	if err == nil {
		return outcome{kind: outcomeAck}
	}
	if errors.Is(err, ErrMalformed) || errors.Is(err, ErrPermanent) {
		return outcome{kind: outcomeDeadLetter}
	}
	if p.maxDeliver > 0 && numDelivered >= uint64(p.maxDeliver) {
		return outcome{kind: outcomeDeadLetter}
	}
	if ra, ok := errors.AsType[*retryAfterError](err); ok {
		return outcome{kind: outcomeRetry, delay: ra.delay}
	}
	return outcome{kind: outcomeRetry, delay: p.delayAfter(numDelivered)}
}

// delayAfter is the backoff before the redelivery that follows attempt n.
// A plain Nak would ignore the consumer's BackOff and redeliver at once, so
// the runtime applies the schedule itself with NakWithDelay.
func (p retryPolicy) delayAfter(n uint64) time.Duration {
	if len(p.backoff) == 0 {
		return p.ackWait
	}
	i := min(int(n)-1, len(p.backoff)-1)
	return p.backoff[max(i, 0)]
}
