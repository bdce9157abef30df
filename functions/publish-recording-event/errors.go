package publishrecordingevent

import "errors"

// ErrConversationMismatch is returned (as a permanent failure) for an event
// whose conversationId differs from the one its recording was first seen
// with: a retry cannot make the two agree.
var ErrConversationMismatch = errors.New("recording belongs to another conversation")
