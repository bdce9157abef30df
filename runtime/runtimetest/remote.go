package runtimetest

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Remote is a real NATS micro service on its own connection, standing in
// for a remote function's handler in another process. It records every
// request and answers each with reply, given the request and its number
// (1 for the first this instance got).
type Remote struct {
	svc micro.Service

	mu    sync.Mutex
	calls []RemoteCall
}

// RemoteCall is one request a Remote got.
type RemoteCall struct {
	Header nats.Header
	Data   []byte
	At     time.Time
}

// StartRemote registers service name (version 1.0.0) with one endpoint on
// subject, in micro's default queue group, and stops it when the test ends.
func StartRemote(t testing.TB, url, name, subject string, reply func(req micro.Request, n int)) *Remote {
	t.Helper()
	nc := Connect(t, url)
	r := &Remote{}
	svc, err := micro.AddService(nc, micro.Config{Name: name, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	err = svc.AddEndpoint("handle", micro.HandlerFunc(func(req micro.Request) {
		r.mu.Lock()
		r.calls = append(r.calls, RemoteCall{Header: nats.Header(req.Headers()), Data: req.Data(), At: time.Now()})
		n := len(r.calls)
		r.mu.Unlock()
		reply(req, n)
	}), micro.WithEndpointSubject(subject))
	if err != nil {
		t.Fatal(err)
	}
	// A flush returns once the server has processed the service's
	// subscriptions: without it a $SRV.INFO sent on another connection
	// right after could find nobody (TestCheckServerFindsRemote, 1 run in
	// 40 on a loaded machine).
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r.svc = svc
	t.Cleanup(r.Stop)
	return r
}

// Calls is every request so far, in arrival order.
func (r *Remote) Calls() []RemoteCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RemoteCall(nil), r.calls...)
}

// Stop unregisters the service; its requests find no responder after.
func (r *Remote) Stop() {
	if !r.svc.Stopped() {
		_ = r.svc.Stop()
	}
}
