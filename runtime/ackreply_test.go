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
			ackMeta{stream: "ORDERS", numDelivered: 3, streamSeq: 1042, timestamp: 1733000000000000000}, true},
		{"v2 with domain, account hash and token", "$JS.ACK.hub.ACCHASH.ORDERS.fn.1.7.7.1733000000000000001.0.tok",
			ackMeta{stream: "ORDERS", numDelivered: 1, streamSeq: 7, timestamp: 1733000000000000001}, true},
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
