package events_test

import (
	"testing"

	"github.com/jetfn/jetfn/events"
)

func decodeSessionEnded(data []byte) error {
	_, err := events.SessionEndedPayload.Decode(data)
	return err
}

// sessionEndedPayloads are what the benchmark decodes: a valid event as the
// transcriber sends it, one with three faults (a bad ID, a missing field and
// a wrong type), and one that is not JSON at all.
var sessionEndedPayloads = []struct {
	name string
	data []byte
}{
	{name: "valid", data: []byte(`{"conversationId":"conv-7f3a91","sessionId":"sess-0192ab","publishedSegments":42}`)},
	{name: "invalid", data: []byte(`{"conversationId":"conv 7f3a91","publishedSegments":"42"}`)},
	{name: "not JSON", data: []byte(`not json`)},
}

// BenchmarkDecodeSessionEnded times the decode-and-check path a function runs
// on every transcription.session-ended message.
func BenchmarkDecodeSessionEnded(b *testing.B) {
	for _, p := range sessionEndedPayloads {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = decodeSessionEnded(p.data)
			}
		})
	}
}
