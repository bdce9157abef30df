package devstack

import "errors"

// ErrDirInUse is returned by OpenDir when another process holds the data
// directory: two nats-servers on one store directory corrupt it.
var ErrDirInUse = errors.New("data directory in use by another jetfn dev")
