package tracing

import "errors"

// ErrProtocol is returned by FromEnv for an OTLP protocol the Go exporters
// do not speak (http/json, or a typo): failing at start beats a process
// that runs without the traces its operator asked for.
var ErrProtocol = errors.New("tracing: unsupported OTLP protocol")
