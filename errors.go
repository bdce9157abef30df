package jetfn

import (
	"errors"
	"fmt"
	"time"

	"github.com/jetfn/jetfn/internal/yamldecode"
)

// ErrMalformed marks a message that can never be handled: its payload is not
// JSON, lacks a required field, or breaks the event's contract (a
// Payload's Handler wraps each PayloadError with it). The runtime
// dead-letters such a message at once and never retries it.
var ErrMalformed = errors.New("malformed message")

// ErrPermanent marks a failure that a retry cannot fix. The runtime
// dead-letters the message at once and never retries it.
var ErrPermanent = errors.New("permanent failure")

// ErrUndeclaredOutput is a publish to a subject the function's manifest
// entry does not list under outputs. It is permanent: a retry cannot fix a
// manifest.
var ErrUndeclaredOutput = errors.New("publish to an undeclared output")

// ErrUndelayedOutput is a PublishAt to an output the manifest does not
// declare `delayed: true`, or without a key (NoDedup): its stream would
// not store the waiting output, or a retry would schedule it twice. It is
// permanent, as ErrUndeclaredOutput is.
var ErrUndelayedOutput = errors.New("delayed publish to an output not declared delayed")

// ErrNoOutputKey is a Publish without a key. It is permanent: the handler
// would publish the same output again on every redelivery, so it must
// derive a key from its input (Msg.ID) or say NoDedup.
var ErrNoOutputKey = errors.New("publish without a key")

// ErrUnknownConfigKey is a key in a function's config block that the
// function does not take: most often a typo, which must not silently leave
// the setting at its default.
var ErrUnknownConfigKey = yamldecode.ErrUnknownKey

// Malformed marks err as a malformed-message failure: dead-letter, never retry.
func Malformed(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}

// Permanent marks err as a failure that a retry cannot fix: dead-letter,
// never retry.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrPermanent, err)
}

// retryAfterError asks for a redelivery after a handler-chosen delay.
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %v", e.delay, e.err)
}

func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter asks the runtime to redeliver the message after d instead of
// after the manifest's backoff delay, for example when a downstream service
// said when it will be back. The delivery still counts towards maxDeliver.
// d is clamped to the function's maxRetryAfter (manifest), which the
// duplicate-window check counts: a longer wait could outlive the window.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, delay: d}
}

// RetryDelay is the delay RetryAfter put into err's chain, for the runtime
// that settles the message.
func RetryDelay(err error) (time.Duration, bool) {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.delay, true
	}
	return 0, false
}
