package summarizesession

import "errors"

// ErrNoMongo is returned by New when the runtime has no database: the
// function reads segments from and writes summaries to Mongo.
var ErrNoMongo = errors.New("summarize-session needs Mongo (set MONGO_URI and MONGO_DATABASE)")

// ErrNoPublisher is returned by New when Deps has no Publisher.
var ErrNoPublisher = errors.New("summarize-session needs a publisher")
