package console

import "errors"

// ErrReadOnly refuses an action on a console started without a token.
var ErrReadOnly = errors.New("the console is read-only: start it with a token to act")

// ErrUnauthorized is an action without a valid session or bearer token.
var ErrUnauthorized = errors.New("sign in with the console's token first")

// ErrCSRF is a state-changing request without the session's CSRF token,
// or from another origin.
var ErrCSRF = errors.New("the request did not come from this console's own page")

// ErrUnknownAction names an action the console does not have.
var ErrUnknownAction = errors.New("no such action")

// ErrNotFound is a function, run, job or revision the console cannot find.
var ErrNotFound = errors.New("not found")

// ErrBadHost refuses a request whose Host is not the loopback address the
// console listens on (a DNS rebinding attempt, or a proxy it does not know).
var ErrBadHost = errors.New("request for a host this console does not serve")
