package crash

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jetfn/jetfn/test/testkit"
	"github.com/nats-io/nats.go/jetstream"
)

// lateSessions is how many sessions each case publishes after the deletion.
const lateSessions = 5

// handleWithin bounds how long a case waits for the runtime to notice a
// deletion, put things back and handle what was published meanwhile: it
// notices within a few seconds, and the sessions take a quiet period each.
const handleWithin = 30 * time.Second

// noticeWithin bounds how long --no-provision takes to report a missing
// consumer on every probe.
const noticeWithin = 20 * time.Second

// TestDeletedConsumer is issue 13, item 5: someone deletes the durable
// consumer, or the whole stream, under a running `jetfn run`. Before the
// fix every pull was a warning and a pause forever, while status showed
// nothing pending and /readyz stayed 200, so the function stopped and
// nothing said so. It runs the real binary against the embedded servers.
func TestDeletedConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds jetfn and runs it: about ten seconds after the build, 75s when the runtime never notices")
	}
	bin, err := testkit.Build(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("provisioning", func(t *testing.T) { testRecreated(t, bin) })
	t.Run("no-provision", func(t *testing.T) { testReportedMissing(t, bin) })
}

// testRecreated: with provisioning on, the runtime recreates what was
// deleted as the manifest declares, and nothing published after the
// deletion is lost or handled twice.
func testRecreated(t *testing.T, bin string) {
	tests := []struct {
		name   string
		remove func(ctx context.Context, js jetstream.JetStream) error
		// streamGone: the stream itself was deleted, so publishes fail
		// until the runtime recreates it (the publisher retries, as the
		// transcriber does) and sequences start again at 1.
		streamGone bool
		// wantFirst is what the session handled before the deletion has
		// in the end: summaries, and transcript.processed in the stream.
		wantFirst [2]int
	}{
		{name: "consumer deleted", wantFirst: [2]int{1, 1}, remove: func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteConsumer(ctx, transcriptionStream, functionName)
		}},
		{name: "stream deleted", streamGone: true, wantFirst: [2]int{1, 0}, remove: func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteStream(ctx, transcriptionStream)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			f := newDeletedFixture(t, bin)
			child := f.start(nil)
			first := f.session("before")
			from := f.nextSeq(ctx)
			f.send(ctx, first, false)
			f.awaitOnce(ctx, handleWithin, "the session published before the deletion", from, []session{first})

			before, err := f.consumerConfig(ctx)
			if err != nil {
				t.Fatalf("reading the consumer the runtime created: %v", err)
			}
			late := make([]session, lateSessions)
			for i := range late {
				late[i] = f.session(fmt.Sprintf("late-%d", i+1))
			}
			// Paused, the child cannot put anything back before the late
			// sessions are stored: a consumer recreated to deliver only
			// new messages would lose them, and this must see it.
			resume := pause(t, child)
			if err := tt.remove(ctx, f.stack.js); err != nil {
				t.Fatalf("deleting: %v", err)
			}
			lateFrom := uint64(1)
			if !tt.streamGone {
				lateFrom = f.nextSeq(ctx)
				for _, s := range late {
					f.send(ctx, s, false)
				}
			}
			resume()
			if tt.streamGone {
				for _, s := range late {
					f.send(ctx, s, true)
				}
			}
			f.awaitOnce(ctx, handleWithin, fmt.Sprintf("%d sessions published after the deletion", lateSessions), lateFrom, late)

			after, err := f.consumerConfig(ctx)
			if err != nil {
				t.Fatalf("consumer %s after the deletion: want it recreated, saw %v", functionName, err)
			}
			if got, want := declaredOf(after), declaredOf(before); got != want {
				t.Fatalf("recreated consumer: want the manifest's %+v, saw %+v", want, got)
			}
			// A recreated consumer may deliver the old session again; the
			// summary's insert and the duplicate window must keep it
			// single. A deleted stream took the old session's notification
			// with it.
			firstFrom := from
			if tt.streamGone {
				firstFrom = 1
			}
			tl := f.count(ctx, firstFrom, []session{first})
			if got := [2]int{tl.summaries[first.key()], tl.notes[first.key()]}; got != tt.wantFirst {
				t.Fatalf("session %s, handled before the deletion: want %d summaries and %d transcript.processed "+
					"once the late ones are handled, saw %s", first.key(), tt.wantFirst[0], tt.wantFirst[1], tl.String([]session{first}))
			}
		})
	}
}

// testReportedMissing: with --no-provision the runtime may not create
// anything, so a deleted consumer must be reported on every probe an
// operator has, and cleared once someone recreates it.
func testReportedMissing(t *testing.T, bin string) {
	ctx := t.Context()
	f := newDeletedFixture(t, bin)
	// A provisioning run creates the streams and the consumer, as a deploy
	// would, then steps aside for the restricted one.
	if err := f.start(nil).Stop(); err != nil {
		t.Fatalf("stopping the provisioning run: %v", err)
	}
	addr := freeAddr(t)
	f.start([]string{"METRICS_ADDR=" + addr}, "--no-provision")
	first := f.session("before")
	from := f.nextSeq(ctx)
	f.send(ctx, first, false)
	awaitProbes(ctx, t, handleWithin, "before the deletion", []probe{
		readyzProbe(addr, http.StatusOK), f.onceProbe(from, first),
	})

	cfg, err := f.consumerConfig(ctx)
	if err != nil {
		t.Fatalf("reading the consumer the provisioning run created: %v", err)
	}
	if err := f.stack.js.DeleteConsumer(ctx, transcriptionStream, functionName); err != nil {
		t.Fatalf("deleting the consumer: %v", err)
	}
	late := f.session("late")
	lateFrom := f.nextSeq(ctx)
	f.send(ctx, late, false)
	awaitProbes(ctx, t, noticeWithin, "consumer deleted under --no-provision", []probe{
		readyzProbe(addr, http.StatusServiceUnavailable),
		statusProbe(bin, f.stack.NATSURL()),
		metricProbe(addr, 1),
		f.consumerErrorProbe(),
	})

	stream, err := f.stack.js.Stream(ctx, transcriptionStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CreateConsumer(ctx, cfg); err != nil {
		t.Fatalf("recreating the consumer with the runtime's own config: %v", err)
	}
	awaitProbes(ctx, t, handleWithin, "consumer recreated by hand", []probe{
		readyzProbe(addr, http.StatusOK),
		metricProbe(addr, 0),
		f.onceProbe(lateFrom, late),
	})
}
