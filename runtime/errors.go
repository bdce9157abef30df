package runtime

import "errors"

// ErrHandlerTimeout is the failure recorded for a handler run that
// outlived the function's timeout and ignored its cancelled context: the
// runtime settles its message without waiting for it (retry with backoff,
// dead letter on the last attempt).
var ErrHandlerTimeout = errors.New("handler timed out")

// ErrServerRefused is returned when the NATS server refuses a stream or
// consumer that the manifest declares, for example a change of storage type.
var ErrServerRefused = errors.New("server refused the manifest")

// ErrDeadLetterIDTaken is a dead letter whose Nats-Msg-Id the dead-letter
// stream already holds for another message: the duplicate acknowledgement
// is not taken for success, so the message is kept and retried rather
// than Term'd with no record.
var ErrDeadLetterIDTaken = errors.New("dead-letter ID already names another message")
