package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/events"
	"github.com/jetfn/jetfn/test/testkit"
)

// TestReadRightAfterFailover is the read TestChaos's report makes once the
// run settled (issue 29: it failed a fresh clone with "reading
// notifications: nats: no responders available for request"): every
// notification of an R3 stream, read right after the server that leads
// the stream stopped. A single attempt can meet no responders or a
// timeout while the stream elects a new leader; testkit.Retry must read
// every notification, each once.
func TestReadRightAfterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster through a leader failover")
	}
	cl := StartCluster(t, 3)
	js, err := jetstream.New(cl.ConnectCluster(t, "reader"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// Right after the cluster starts, its meta leader may not have seen
	// every peer yet, and refuses an R3 placement until it has (CI, once).
	var s jetstream.Stream
	err = testkit.Retry(ctx, 30*time.Second, "creating the R3 stream", func(ctx context.Context) error {
		var err error
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: transcriptionStream,
			Subjects: []string{events.TranscriptProcessedSubject}, Replicas: 3})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		data, _ := json.Marshal(events.TranscriptProcessed{ConversationID: "conv", SessionID: fmt.Sprintf("s-%02d", i)})
		if _, err := js.Publish(ctx, events.TranscriptProcessedSubject, data); err != nil {
			t.Fatal(err)
		}
	}
	var leader string
	if err := testkit.Poll(ctx, 20*time.Millisecond, "a stream leader", func(ctx context.Context) bool {
		info, err := s.Info(ctx)
		if err == nil && info.Cluster != nil {
			leader = info.Cluster.Leader
		}
		return leader != ""
	}); err != nil {
		t.Fatal(err)
	}
	cl.Stop(leader)
	once, onceErr := testkit.ScanNotifications(ctx, js, transcriptionStream, 1)
	t.Logf("one attempt right after %s stopped: %d notifications, err %v", leader, len(once), onceErr)
	var notes []testkit.Notification
	err = testkit.Retry(ctx, time.Minute, "reading notifications", func(ctx context.Context) error {
		var err error
		notes, err = testkit.ScanNotifications(ctx, js, transcriptionStream, 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, nt := range notes {
		seen[nt.Key]++
	}
	if len(notes) != n || len(seen) != n {
		t.Errorf("%d notifications read, %d distinct, want %d of each", len(notes), len(seen), n)
	}
}
