package runtime

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestMaxDeliveriesAdvisoryDeadLetters covers the third dead-letter route: a
// message whose every delivery ends with no handler result (here the
// handler hangs with its heartbeat off, as if the process had died) is
// dropped by JetStream after maxDeliver with only an advisory to show for
// it. The runtime must catch that advisory and dead-letter the message.
func TestMaxDeliveriesAdvisoryDeadLetters(t *testing.T) {
	env := newEnv(t)
	m := testManifest(t, "    ackWait: 300ms\n    maxDeliver: 2\n    concurrency: 3\n")
	if err := m.Validate([]string{"fn"}); err != nil {
		t.Fatal(err)
	}
	m.Functions[0].Heartbeat = time.Hour
	// Concurrency 3: two workers hang, the third keeps a pull open. The
	// server sends the advisory only when it would redeliver, which needs
	// a waiting pull, as a restarted instance would have.
	hang := HandlerFunc(func(ctx context.Context, _ Msg) error {
		<-ctx.Done()
		return ctx.Err()
	})
	r := env.startUnvalidated(m, hang, WithDrainTimeout(100*time.Millisecond))
	env.publish("test.in", `{"id":"lost"}`)
	dl := env.deadLetters(1)[0]
	if got := dl.Header.Get(HeaderError); !strings.Contains(got, "without a handler result") {
		t.Errorf("reason %q, want the max-deliveries explanation", got)
	}
	if got := dl.Header.Get(HeaderNumDelivered); got != "2" {
		t.Errorf("num delivered %s, want 2", got)
	}
	if string(dl.Data) != `{"id":"lost"}` || dl.Header.Get(HeaderStreamSequence) != "1" {
		t.Errorf("dead letter %q seq %s, want the original payload and sequence 1", dl.Data, dl.Header.Get(HeaderStreamSequence))
	}
	if s := r.rt.statsOf(t, "fn"); s.DeadLettered != 1 {
		t.Errorf("dead_lettered = %d, want 1", s.DeadLettered)
	}
}
