package crash

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Class is what the proxy makes of one client-to-server operation.
type Class int

const (
	// ClassOther is every operation the proxy has no rule for: CONNECT,
	// SUB, UNSUB, PING, PONG, pull requests and other publishes.
	ClassOther Class = iota
	// ClassNotify is a PUB or HPUB to the notify subject.
	ClassNotify
	// ClassAck is a PUB to a $JS.ACK.… subject that settles a message: an
	// ack (+ACK or an empty payload), -NAK, +TERM or +NXT.
	ClassAck
	// ClassProgress is a PUB of +WPI to a $JS.ACK.… subject: a heartbeat,
	// which only resets the ack-wait timer. It is kept apart from ClassAck
	// so dropping acks does not also stop the heartbeats.
	ClassProgress
	numClasses
)

func (c Class) String() string {
	switch c {
	case ClassNotify:
		return "notify"
	case ClassAck:
		return "ack"
	case ClassProgress:
		return "progress"
	default:
		return "other"
	}
}

// jsAckPrefix starts the reply subject of every JetStream delivery; a
// publish to it is an ack, a nak, a term or a heartbeat.
const jsAckPrefix = "$JS.ACK."

// frame is one complete client operation: its control line and, for PUB and
// HPUB, the payload with its trailing CRLF.
type frame struct {
	op      string
	subject string
	class   Class
	raw     []byte
}

// readFrame reads the next client operation. It knows the client side of
// the NATS protocol (CONNECT, PUB, HPUB, SUB, UNSUB, PING, PONG); anything
// else is an error, since forwarding an unknown operation could split a
// payload from its control line.
func readFrame(r *bufio.Reader, notify string) (frame, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return frame{}, err
	}
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return frame{}, fmt.Errorf("empty control line %q", line)
	}
	f := frame{op: strings.ToUpper(fields[0]), raw: line}
	switch f.op {
	case "CONNECT", "SUB", "UNSUB", "PING", "PONG":
		return f, nil
	case "PUB":
		return readPayload(r, f, fields, 3, 4, notify)
	case "HPUB":
		return readPayload(r, f, fields, 4, 5, notify)
	default:
		return frame{}, fmt.Errorf("unknown client operation %q", f.op)
	}
}

// readPayload reads the payload of a PUB (subject [reply] size) or an HPUB
// (subject [reply] header-size total-size): the last field is the number of
// bytes that follow, before the closing CRLF.
func readPayload(r *bufio.Reader, f frame, fields []string, minFields, maxFields int, notify string) (frame, error) {
	if len(fields) < minFields || len(fields) > maxFields {
		return frame{}, fmt.Errorf("malformed %s line %q", f.op, f.raw)
	}
	size, err := strconv.Atoi(fields[len(fields)-1])
	if err != nil || size < 0 {
		return frame{}, fmt.Errorf("malformed %s size in %q", f.op, f.raw)
	}
	payload := make([]byte, size+2)
	if _, err := io.ReadFull(r, payload); err != nil {
		return frame{}, err
	}
	f.subject = fields[1]
	f.raw = append(f.raw, payload...)
	body := payload[:size]
	if f.op == "HPUB" {
		hdr, err := strconv.Atoi(fields[len(fields)-2])
		if err != nil || hdr < 0 || hdr > size {
			return frame{}, fmt.Errorf("malformed HPUB header size in %q", f.raw)
		}
		body = body[hdr:]
	}
	f.class = classify(f.subject, body, notify)
	return f, nil
}

func classify(subject string, body []byte, notify string) Class {
	switch {
	case subject == notify:
		return ClassNotify
	case strings.HasPrefix(subject, jsAckPrefix) && bytes.HasPrefix(body, []byte("+WPI")):
		return ClassProgress
	case strings.HasPrefix(subject, jsAckPrefix):
		return ClassAck
	default:
		return ClassOther
	}
}
