package dlq

import "errors"

// ErrNotFound is a sequence with no message on the dead-letter stream.
var ErrNotFound = errors.New("no such dead letter")

// ErrNotDeadLetter is a message on the dead-letter stream that lacks the
// runtime's headers, so there is no original subject to replay it to.
var ErrNotDeadLetter = errors.New("not a jetfn dead letter")

// ErrAlreadyReplayed refuses a second replay of the same dead letter; with
// Force the dead letter is replayed again under the next attempt number, if
// it still exists.
var ErrAlreadyReplayed = errors.New("already replayed")

// ErrReplayConflict is a replay record that changed while this replay
// claimed it: another replay of the same dead letter is under way.
var ErrReplayConflict = errors.New("dead letter is being replayed by someone else")

// ErrStreamMoved is a dead letter whose original subject is no longer
// stored by its original stream; replaying it would not reach the function.
var ErrStreamMoved = errors.New("original subject moved to another stream")

// ErrPayloadOmitted is a dead letter stored without its payload, too large
// to store with the dead letter's headers: a replay would hand the function
// an empty message. The original stream may still hold it.
var ErrPayloadOmitted = errors.New("the dead letter holds no payload: it was too large to store")
