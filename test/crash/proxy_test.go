package crash

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/runtime/runtimetest"
)

const notifySubject = "transcript.processed"

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Class
		wantErr string
	}{
		{name: "control lines", in: "CONNECT {\"verbose\":false}\r\nPING\r\nPONG\r\nSUB a 1\r\nUNSUB 1\r\n",
			want: []Class{ClassOther, ClassOther, ClassOther, ClassOther, ClassOther}},
		{name: "publish to the notify subject", in: "PUB transcript.processed 2\r\nhi\r\n", want: []Class{ClassNotify}},
		{name: "publish with a reply and CRLF in the payload", in: "PUB transcript.processed _INBOX.x 4\r\n\r\n\r\n\r\nPING\r\n",
			want: []Class{ClassNotify, ClassOther}},
		{name: "headers", in: "HPUB transcript.processed _INBOX.x 21 23\r\nNATS/1.0\r\nA: +WPI\r\n\r\nhi\r\n", want: []Class{ClassNotify}},
		{name: "ack", in: "PUB $JS.ACK.S.C.1.2.3.4.0 4\r\n+ACK\r\n", want: []Class{ClassAck}},
		{name: "empty ack", in: "pub $JS.ACK.S.C.1.2.3.4.0 0\r\n\r\n", want: []Class{ClassAck}},
		{name: "nak with delay", in: "PUB $JS.ACK.S.C.1.2.3.4.0 22\r\n-NAK {\"delay\":1000000}\r\n", want: []Class{ClassAck}},
		{name: "heartbeat", in: "PUB $JS.ACK.S.C.1.2.3.4.0 4\r\n+WPI\r\n", want: []Class{ClassProgress}},
		{name: "other publish", in: "PUB transcript.processedx 0\r\n\r\n", want: []Class{ClassOther}},
		{name: "unknown operation", in: "MSG a 1 0\r\n\r\n", wantErr: "unknown client operation"},
		{name: "bad size", in: "PUB a x\r\n", wantErr: "malformed PUB size"},
		{name: "truncated payload", in: "PUB a 10\r\nabc", wantErr: "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tt.in))
			var got []Class
			var err error
			for {
				var f frame
				f, err = readFrame(r, notifySubject)
				if err != nil {
					break
				}
				got = append(got, f.class)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("error = %v, want EOF", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("classes = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestProxy sends one operation of a class through the proxy under each
// action, then a marker publish, against a real nats-server, and checks
// what reached a subscriber connected straight to the server.
func TestProxy(t *testing.T) {
	ns := runtimetest.StartNATS(t)
	direct := runtimetest.Connect(t, ns.ClientURL())
	tests := []struct {
		name     string
		class    Class
		action   Action
		wantSeen bool // the operation reached the server
	}{
		{name: "notify passes", class: ClassNotify, action: Pass, wantSeen: true},
		{name: "notify dropped", class: ClassNotify, action: Drop},
		{name: "notify freezes", class: ClassNotify, action: Freeze},
		{name: "ack passes", class: ClassAck, action: Pass, wantSeen: true},
		{name: "ack dropped", class: ClassAck, action: Drop},
		{name: "ack freezes", class: ClassAck, action: Freeze},
		{name: "dropping acks keeps heartbeats", class: ClassProgress, action: Pass, wantSeen: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := StartProxy(ns.Addr().String(), notifySubject, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			seen := subscribe(t, direct, notifySubject, "$JS.ACK.>", "marker")
			if tt.class == ClassProgress {
				p.Set(ClassAck, Drop)
			} else {
				p.Set(tt.class, tt.action)
			}
			client := runtimetest.Connect(t, p.URL())
			send(t, client, tt.class)
			if err := client.Publish("marker", nil); err != nil {
				t.Fatal(err)
			}
			if tt.action == Freeze {
				checkFrozen(t, p, seen, tt.class)
				return
			}
			got := waitMarker(t, seen)
			if gotSeen := got > 1; gotSeen != tt.wantSeen {
				t.Errorf("operation reached the server = %v, want %v", gotSeen, tt.wantSeen)
			}
			if n := p.Count(tt.class, tt.action); n != 1 {
				t.Errorf("Count(%s, %s) = %d, want 1", tt.class, tt.action, n)
			}
		})
	}
}

// send publishes one operation of class c the way the runtime does:
// js.Publish sends an HPUB with a reply inbox; acks and heartbeats are PUBs
// to the delivery's $JS.ACK reply subject.
func send(t *testing.T, nc *nats.Conn, c Class) {
	t.Helper()
	var err error
	switch c {
	case ClassNotify:
		msg := nats.NewMsg(notifySubject)
		msg.Header.Set(nats.MsgIdHdr, "c1:s1")
		msg.Reply = nc.NewRespInbox()
		msg.Data = []byte(`{"conversationId":"c1"}`)
		err = nc.PublishMsg(msg)
	case ClassAck:
		err = nc.Publish("$JS.ACK.TRANSCRIPTION.summarize-session.1.7.7.1700000000.0", []byte("+ACK"))
	case ClassProgress:
		err = nc.Publish("$JS.ACK.TRANSCRIPTION.summarize-session.1.7.7.1700000000.0", []byte("+WPI"))
	}
	if err != nil {
		t.Fatal(err)
	}
}

func subscribe(t *testing.T, nc *nats.Conn, subjects ...string) chan *nats.Msg {
	t.Helper()
	ch := make(chan *nats.Msg, 16)
	for _, s := range subjects {
		sub, err := nc.ChanSubscribe(s, ch)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

// waitMarker returns how many messages arrived up to and including the
// marker. The server keeps one connection's order, so once the marker is
// in, an operation sent before it is in too, or never will be.
func waitMarker(t *testing.T, seen chan *nats.Msg) int {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for n := 1; ; n++ {
		select {
		case m := <-seen:
			if m.Subject == "marker" {
				return n
			}
		case <-deadline:
			t.Fatal("the marker never arrived")
		}
	}
}

// checkFrozen waits until the proxy has held the marker: then nothing of
// the frozen connection was written to the server. A new connection after
// Reset passes again.
func checkFrozen(t *testing.T, p *Proxy, seen chan *nats.Msg, c Class) {
	t.Helper()
	runtimetest.Eventually(t, 5*time.Second, "the marker to be held", func() bool {
		return p.Count(ClassOther, Freeze) > 0
	})
	if n := p.Count(c, Freeze); n != 1 {
		t.Errorf("Count(%s, freeze) = %d, want 1", c, n)
	}
	if len(seen) != 0 {
		t.Errorf("%d messages reached the server from a frozen connection", len(seen))
	}
	p.Reset()
	again := runtimetest.Connect(t, p.URL())
	if err := again.Publish("marker", nil); err != nil {
		t.Fatal(err)
	}
	if got := waitMarker(t, seen); got != 1 {
		t.Errorf("after Reset, %d messages arrived with the marker, want only the marker", got)
	}
}
