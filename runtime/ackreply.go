package runtime

// A delivery's metadata comes from its reply subject, parsed by hand: it
// runs for every message.

import (
	"math"
	"strings"
)

// ackMeta is what the runtime needs from a delivery's reply subject,
// parsed without allocating (nats.Msg.Metadata allocates on every message).
type ackMeta struct {
	stream       string
	numDelivered uint64
	streamSeq    uint64
	// consumerSeq counts the consumer's deliveries, redeliveries too: the
	// router reads a gap in it as messages that went elsewhere.
	consumerSeq uint64
	timestamp   int64
	// pending is how many messages the consumer had left after this one
	// when it delivered it: a schedule's tick with some after it is
	// superseded (schedule.go).
	pending uint64
}

// parseAckReply reads a JetStream ack subject:
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>, or
// the newer form with <domain>.<account hash> after $JS.ACK and a random
// token at the end. It runs for every message, which raw nats.go code that
// never asks for the metadata does not pay, so it reads the numbers by
// hand: about 90 ns against 194 with strings.Cut and strconv
// (BenchmarkParseAckReply).
func parseAckReply(reply string) (ackMeta, bool) {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return ackMeta{}, false
	}
	var tok [10]string // the tokens after the prefix; any further ones are ignored
	n := 0
	for rest := reply[len(prefix):]; n < len(tok); n++ {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			tok[n] = rest
			n++
			break
		}
		tok[n], rest = rest[:i], rest[i+1:]
	}
	if n < 7 {
		return ackMeta{}, false
	}
	i := 0 // v1: stream first
	if n >= 9 {
		i = 2 // v2: domain and account hash first
	}
	delivered, ok1 := decimal(tok[i+2])
	sseq, ok2 := decimal(tok[i+3])
	cseq, ok4 := decimal(tok[i+4])
	ts, ok3 := decimal(tok[i+5])
	if !ok1 || !ok2 || !ok3 || !ok4 || ts > math.MaxInt64 {
		return ackMeta{}, false
	}
	pending, _ := decimal(tok[i+6])
	return ackMeta{stream: tok[i], numDelivered: delivered, streamSeq: sseq, consumerSeq: cseq, timestamp: int64(ts), pending: pending}, true
}

// ackPrefix is the start of every v1 ack subject of one consumer:
// $JS.ACK.<stream>.<consumer>.
func ackPrefix(stream, consumer string) string {
	return "$JS.ACK." + stream + "." + consumer + "."
}

// parseOwnAckReply is parseAckReply for a delivery of the consumer whose
// ackPrefix is prefix: it compares the prefix instead of splitting it and
// reads the five numbers after it in one pass: 56 ns against 82 here
// (BenchmarkParseOwnAckReply, BenchmarkParseAckReply). Any other subject,
// the v2 form included, is left to parseAckReply.
func parseOwnAckReply(reply, prefix, stream string) (ackMeta, bool) {
	if !strings.HasPrefix(reply, prefix) {
		return parseAckReply(reply)
	}
	// delivered, stream sequence, consumer sequence, timestamp, pending
	var nums [5]uint64
	rest := reply[len(prefix):]
	for k := range nums {
		v, n, ok := leadingDecimal(rest)
		if !ok {
			return parseAckReply(reply)
		}
		nums[k], rest = v, rest[n:]
		if k < len(nums)-1 {
			if rest == "" || rest[0] != '.' {
				return parseAckReply(reply)
			}
			rest = rest[1:]
		}
	}
	if rest != "" || nums[3] > math.MaxInt64 {
		return parseAckReply(reply) // more tokens: not the v1 form after all
	}
	return ackMeta{stream: stream, numDelivered: nums[0], streamSeq: nums[1], consumerSeq: nums[2], timestamp: int64(nums[3]), pending: nums[4]}, true
}

// leadingDecimal reads the decimal that s starts with, up to the first
// non-digit: its value and length; false if there is none or it has more
// than 19 digits (which could overflow).
func leadingDecimal(s string) (v uint64, n int, ok bool) {
	for n < len(s) && n < 20 {
		d := s[n] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
		n++
	}
	return v, n, n > 0 && n <= 19
}

// decimal reads a non-negative decimal of at most 19 digits, which cannot
// overflow a uint64.
func decimal(s string) (uint64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	return v, true
}
