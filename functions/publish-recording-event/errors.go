package publishrecordingevent

import "errors"

// ErrNoMongo is returned by New when the runtime has no database: the
// function records every event in Mongo.
var ErrNoMongo = errors.New("publish-recording-event needs Mongo (set MONGO_URI and MONGO_DATABASE)")

// ErrNoPublisher is returned by New when Deps has no Publisher.
var ErrNoPublisher = errors.New("publish-recording-event needs a publisher")

// ErrConversationMismatch is returned (as a permanent failure) for an event
// whose conversationId differs from the one its recording was first seen
// with: a retry cannot make the two agree.
var ErrConversationMismatch = errors.New("recording belongs to another conversation")
