package runtime

import "testing"

// TestParseAckReply reads both forms of the JetStream ack subject and
// refuses what is not one.
func TestParseAckReply(t *testing.T) {
	tests := []struct {
		name  string
		reply string
		want  ackMeta
		ok    bool
	}{
		{"v1", "$JS.ACK.ORDERS.fn.3.1042.77.1733000000000000000.5",
			ackMeta{stream: "ORDERS", numDelivered: 3, streamSeq: 1042, consumerSeq: 77, timestamp: 1733000000000000000, pending: 5}, true},
		{"v2 with domain, account hash and token", "$JS.ACK.hub.ACCHASH.ORDERS.fn.1.7.7.1733000000000000001.0.tok",
			ackMeta{stream: "ORDERS", numDelivered: 1, streamSeq: 7, consumerSeq: 7, timestamp: 1733000000000000001}, true},
		{"too few tokens", "$JS.ACK.ORDERS.fn.3.1042", ackMeta{}, false},
		{"not an ack subject", "_INBOX.abc.def.1.2.3.4.5.6", ackMeta{}, false},
		{"a count that is no number", "$JS.ACK.ORDERS.fn.x.1042.77.1733000000000000000.5", ackMeta{}, false},
		{"empty", "", ackMeta{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseAckReply(tt.reply)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("parseAckReply(%q) = %+v, %v; want %+v, %v", tt.reply, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestParseOwnAckReply: with its consumer's prefix the fast path reads
// what parseAckReply reads, and leaves every other subject to it.
func TestParseOwnAckReply(t *testing.T) {
	prefix := ackPrefix("ORDERS", "fn")
	for _, reply := range []string{
		"$JS.ACK.ORDERS.fn.3.1042.77.1733000000000000000.5",
		"$JS.ACK.ORDERS.fn.1.7.7.1733000000000000001.0.tok",             // a token more: not v1
		"$JS.ACK.hub.ACCHASH.ORDERS.fn.1.7.7.1733000000000000001.0.tok", // v2
		"$JS.ACK.ORDERS.other.3.1042.77.1733000000000000000.5",          // another consumer
		"$JS.ACK.ORDERS.fn.3.1042.77.1733000000000000000",               // a number short
		"$JS.ACK.ORDERS.fn.3.1042.77.1733000000000000000.",              // an empty one
		"$JS.ACK.ORDERS.fn.3..77.1733000000000000000.5",
		"$JS.ACK.ORDERS.fn.x.1042.77.1733000000000000000.5",
		"$JS.ACK.ORDERS.fn.3.1042.77.17330000000000000000000.5", // 23 digits
		"$JS.ACK.ORDERS.fn.3.1042.77.9999999999999999999.5",     // past MaxInt64
		"$JS.ACK.ORDERS.fn.",
		"",
	} {
		got, ok := parseOwnAckReply(reply, prefix, "ORDERS")
		want, wantOK := parseAckReply(reply)
		if got != want || ok != wantOK {
			t.Errorf("parseOwnAckReply(%q) = %+v, %v; parseAckReply reads %+v, %v", reply, got, ok, want, wantOK)
		}
	}
	if got, ok := parseOwnAckReply("$JS.ACK.ORDERS.fn.3.1042.77.1733000000000000000.5", prefix, "ORDERS"); !ok ||
		got != (ackMeta{stream: "ORDERS", numDelivered: 3, streamSeq: 1042, consumerSeq: 77, timestamp: 1733000000000000000, pending: 5}) {
		t.Fatalf("v1 of the own consumer: %+v, %v", got, ok)
	}
}

// BenchmarkParseAckReply is the per-message cost of reading a delivery's
// metadata from its reply subject; raw nats.go code that never calls
// Metadata() does not pay it.
func BenchmarkParseAckReply(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseAckReply("$JS.ACK.bench.bench.1.123456.123456.1733000000000000000.42"); !ok {
			b.Fatal("refused")
		}
	}
}

// BenchmarkParseOwnAckReply is that cost on the path every delivery takes:
// its own consumer's v1 subject.
func BenchmarkParseOwnAckReply(b *testing.B) {
	prefix := ackPrefix("bench", "bench")
	for b.Loop() {
		if _, ok := parseOwnAckReply("$JS.ACK.bench.bench.1.123456.123456.1733000000000000000.42", prefix, "bench"); !ok {
			b.Fatal("refused")
		}
	}
}
