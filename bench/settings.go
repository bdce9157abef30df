package bench

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/events"
	summarizesession "github.com/jetfn/jetfn/functions/summarize-session"
	"github.com/jetfn/jetfn/manifest"
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
	// ackWait is the consumer's; 0 means the shared ackWait.
	ackWait time.Duration
}

func (w workload) ackWaitOrDefault() time.Duration {
	if w.ackWait > 0 {
		return w.ackWait
	}
	return ackWait
}

var noopWorkload = workload{
	stream: "BENCH", durable: "noop", subject: "bench.msg",
	streams: map[string][]string{"BENCH": {"bench.>"}, "DEADLETTER": {"deadletter.>"}},
}

// slowWorkload is the no-op function's stream with a handler that sleeps
// and a short ack wait (Config.SlowAckWait), so that a message left in a
// client buffer outlives it.
func slowWorkload(ackWait time.Duration) workload {
	w := noopWorkload
	w.durable, w.subject, w.ackWait = "slow", "bench.slow", ackWait
	return w
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
		AckWait: w.ackWaitOrDefault(), MaxDeliver: maxDeliver, MaxAckPending: maxAckPending, FilterSubject: w.subject,
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

// noopManifest binds the no-op function of workload w with the shared
// settings; prefetch nil leaves the runtime's derived default.
func noopManifest(w workload, concurrency int, prefetch *int) (*manifest.Manifest, error) {
	text := fmt.Sprintf(manifestStreams, w.stream, "bench.>") + "functions:" +
		fmt.Sprintf(manifestFunction, w.durable, w.stream, w.subject, w.ackWaitOrDefault(), maxDeliver, maxAckPending, concurrency)
	if prefetch != nil {
		text += fmt.Sprintf("    prefetch: %d\n", *prefetch)
	}
	return manifest.Parse([]byte(text))
}

// sessionManifest binds summarize-session with the shared settings and the
// given quiet period.
func sessionManifest(concurrency int, quiet time.Duration) (*manifest.Manifest, error) {
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
	return manifest.Parse([]byte(text))
}
