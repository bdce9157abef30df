package runtime

import (
	"errors"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
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
// decide maps a handler's result to an outcome, as documented on Handler.
func decide(err error, numDelivered uint64, p *manifest.FunctionSpec) outcome {
	if err == nil {
		return outcome{kind: outcomeAck}
	}
	if errors.Is(err, jetfn.ErrMalformed) || errors.Is(err, jetfn.ErrPermanent) {
		return outcome{kind: outcomeDeadLetter}
	}
	if p.MaxDeliver > 0 && numDelivered >= uint64(p.MaxDeliver) {
		return outcome{kind: outcomeDeadLetter}
	}
	if delay, ok := jetfn.RetryDelay(err); ok {
		return outcome{kind: outcomeRetry, delay: delay}
	}
	return outcome{kind: outcomeRetry, delay: p.RetryDelay(numDelivered)}
}
