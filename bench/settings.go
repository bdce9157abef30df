package bench

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/events"
	summarizesession "github.com/jetfn/jetfn/functions/summarize-session"
	"github.com/jetfn/jetfn/runtime"
)

// The consumer settings both variants share. The baseline builds its
// stream and consumer from them by hand (streamConfig, consumerConfig);
// jetfn gets the same values through its manifest.
const (
	ackWait       = 30 * time.Second
	maxDeliver    = 5
	maxAckPending = 1000
	duplicates    = 24 * time.Hour
)

// workload is what one case publishes to and whose acks it watches.
type workload struct {
	stream  string
	durable string
	subject string
	// streams are every stream the variant creates (name → subjects).
	streams map[string][]string
}

var noopWorkload = workload{
	stream: "BENCH", durable: "noop", subject: "bench.msg",
	streams: map[string][]string{"BENCH": {"bench.>"}, "DEADLETTER": {"deadletter.>"}},
}

// sessionWorkload keeps transcript.processed on a stream of its own, so
// the input stream's sequence numbers are exactly the publish order (see
// load.go). summarize-session does not care which stream stores its output.
var sessionWorkload = workload{
	stream: "TRANSCRIPTION", durable: summarizesession.Name, subject: events.SessionEndedSubject,
	streams: map[string][]string{
		"TRANSCRIPTION": {"transcription.>"}, "PROCESSED": {"transcript.>"}, "DEADLETTER": {"deadletter.>"},
	},
}

// streamConfig mirrors what the runtime makes of a manifest stream with
// only name and subjects set.
func streamConfig(name string, subjects []string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: name, Subjects: subjects, Duplicates: duplicates,
		Storage: jetstream.FileStorage, Replicas: 1,
	}
}

// consumerConfig mirrors the runtime's durable pull consumer.
func consumerConfig(w workload) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: w.durable, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait: ackWait, MaxDeliver: maxDeliver, MaxAckPending: maxAckPending, FilterSubject: w.subject,
	}
}

const manifestStreams = `
streams:
  - name: %s
    subjects: [%q]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
`

const manifestFunction = `
  - name: %s
    version: 1.0.0
    stream: %s
    subject: %s
    ackWait: %s
    maxDeliver: %d
    maxAckPending: %d
    concurrency: %d
`

// noopManifest binds the no-op function with the shared settings.
func noopManifest(concurrency int) (*runtime.Manifest, error) {
	w := noopWorkload
	text := fmt.Sprintf(manifestStreams, w.stream, "bench.>") + "functions:" +
		fmt.Sprintf(manifestFunction, w.durable, w.stream, w.subject, ackWait, maxDeliver, maxAckPending, concurrency)
	return runtime.ParseManifest([]byte(text))
}

// sessionManifest binds summarize-session with the shared settings and the
// given quiet period.
func sessionManifest(concurrency int, quiet time.Duration) (*runtime.Manifest, error) {
	w := sessionWorkload
	text := fmt.Sprintf(manifestStreams, w.stream, "transcription.>") + `
  - name: PROCESSED
    subjects: ["transcript.>"]
functions:` + fmt.Sprintf(manifestFunction, w.durable, w.stream, w.subject, ackWait, maxDeliver, maxAckPending, concurrency) + `
    outputs:
      - subject: transcript.processed
        stream: PROCESSED
    config:
      quiet: ` + quiet.String() + `
      maxRounds: 5
`
	return runtime.ParseManifest([]byte(text))
}
