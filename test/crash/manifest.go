package crash

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// The consumer settings of summarize-session in manifests/local.yaml; the
// harness's manifest uses the same, so recovery times match production.
const (
	ackWait     = 6 * time.Second
	heartbeat   = 2 * time.Second
	maxDeliver  = 5
	concurrency = 8
	maxRounds   = 5
)

// Stream names the harness's manifest declares.
const (
	transcriptionStream = "TRANSCRIPTION"
	deadLetterStream    = "DEADLETTER"
	functionName        = "summarize-session"
)

// manifestTemplate binds summarize-session alone; the verbs are the
// duplicate window, the consumer settings and the quiet period.
const manifestTemplate = `# Written by the crash harness (test/crash) for one run.
deadLetter:
  stream: DEADLETTER
  subjectPrefix: deadletter
streams:
  - name: TRANSCRIPTION
    subjects: ["transcription.>", "transcript.>"]
    duplicates: %s
  - name: DEADLETTER
    subjects: ["deadletter.>"]
    duplicates: 24h
functions:
  - name: summarize-session
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.session-ended
    ackWait: %s
    maxDeliver: %d
    heartbeat: %s
    backoff: [%s]
    concurrency: %d
    timeout: 2m
    maxOutage: 1h
    outputs:
      - subject: transcript.processed
        stream: TRANSCRIPTION
    config:
      quiet: %s
      maxRounds: %d
`

// dayWindow is the production duplicate window; a shorter one makes the
// runtime refuse the manifest unless it runs with --allow-short-window.
const dayWindow = 24 * time.Hour

// consumerSettings are summarize-session's consumer keys in a manifest.
type consumerSettings struct {
	ackWait, heartbeat time.Duration
	maxDeliver         int
}

// localConsumer is what manifests/local.yaml declares; every row but
// max-deliveries-all-down uses it.
var localConsumer = consumerSettings{ackWait: ackWait, heartbeat: heartbeat, maxDeliver: maxDeliver}

// localBackoff is manifests/local.yaml's backoff.
var localBackoff = []string{"1s", "5s", "15s", "30s"}

// backoff is localBackoff cut to maxDeliver entries: the runtime refuses a
// backoff longer than maxDeliver.
func (c consumerSettings) backoff() string {
	return strings.Join(localBackoff[:min(len(localBackoff), c.maxDeliver)], ", ")
}

// manifestParams is what one run's manifest varies.
type manifestParams struct {
	window, quiet time.Duration
	consumer      consumerSettings
}

// writeManifest writes the manifest for one run to path.
func writeManifest(path string, m manifestParams) error {
	c := m.consumer
	text := fmt.Sprintf(manifestTemplate, m.window, c.ackWait, c.maxDeliver, c.heartbeat, c.backoff(),
		concurrency, m.quiet, maxRounds)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	return nil
}
