package runtime

import (
	"errors"
	"fmt"
	"time"
)

// ErrMalformed marks a message that can never be handled: its payload is not
// valid JSON, lacks a required field, or breaks the event's contract. The
// runtime dead-letters such a message at once and never retries it.
var ErrMalformed = errors.New("malformed message")

// ErrPermanent marks a failure that a retry cannot fix. The runtime
// dead-letters the message at once and never retries it.
var ErrPermanent = errors.New("permanent failure")

// ErrUnknownFunction is returned when a manifest names a function that this
// binary does not contain.
var ErrUnknownFunction = errors.New("unknown function")

// ErrInvalidManifest wraps every problem found while validating a manifest.
var ErrInvalidManifest = errors.New("invalid manifest")

// ErrInvalidConfig wraps every problem CheckConfigs finds in a manifest's
// config blocks. It wraps ErrInvalidManifest, so a caller that refuses an
// invalid manifest refuses a bad config block the same way.
var ErrInvalidConfig = fmt.Errorf("%w: function config", ErrInvalidManifest)

// ErrUnknownConfigKey is a key in a function's config block that the
// function does not take: most often a typo, which must not silently leave
// the setting at its default.
var ErrUnknownConfigKey = errors.New("unknown key")

// ErrShortWindow is returned when an output stream's duplicate window is
// shorter than twice the longest time after which a function may publish the
// same output again; a redelivery after the window would store it twice.
var ErrShortWindow = errors.New("duplicate window shorter than the redelivery horizon")

// ErrUndeclaredOutput is a publish to a subject the function's manifest
// entry does not list under outputs. It is permanent: a retry cannot fix a
// manifest.
var ErrUndeclaredOutput = errors.New("publish to an undeclared output")

// ErrHandlerTimeout is the failure recorded for a handler run that
// outlived the function's timeout and ignored its cancelled context: the
// runtime settles its message without waiting for it (retry with backoff,
// dead letter on the last attempt).
var ErrHandlerTimeout = errors.New("handler timed out")

// ErrServerRefused is returned when the NATS server refuses a stream or
// consumer that the manifest declares, for example a change of storage type.
var ErrServerRefused = errors.New("server refused the manifest")

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
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, delay: d}
}
