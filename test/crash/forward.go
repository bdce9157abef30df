package crash

import (
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the dial to the server for each client connection.
const dialTimeout = 2 * time.Second

// forwardEach accepts connections on ln until it is closed and, on a
// goroutine of wg for each, dials upstream and hands both ends to serve.
// The proxy and the relay forward this way. A dial that fails (the server
// is down: a restart) closes the client, which sees a closed connection and
// reconnects.
func forwardEach(ln net.Listener, wg *sync.WaitGroup, upstream string, serve func(client, server net.Conn)) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return // closed
		}
		wg.Go(func() {
			server, err := net.DialTimeout("tcp", upstream, dialTimeout)
			if err != nil {
				_ = client.Close()
				return
			}
			serve(client, server)
		})
	}
}
