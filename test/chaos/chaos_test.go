package chaos

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestChaos is the short version of `go tool task chaos`: one fault of
// each kind against a 3-node cluster with sync_interval: always and two
// jetfn instances, a session every 200ms and, meanwhile, up to 36
// recordings' events (324), a burst of three every 600ms. Every
// acknowledged session must end as exactly one summary and one
// notification (none lost, duplicated or dead-lettered), and every
// acknowledged recording event as exactly one notice, in its recording's
// order. About 1.5 minutes on two cores (63s of faults, plus building
// jetfn and nats-server); figures are logged, not asserted.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three nats-server processes through six faults")
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := New(t.Context(), Options{Dir: t.TempDir(), Sync: "always", Instances: 2, Quiet: 200 * time.Millisecond, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	rep, err := h.Run(t.Context(), Plan{Kinds: Kinds, PerKind: 1, Every: 200 * time.Millisecond,
		GiveUp: time.Minute, Settle: time.Minute, Recordings: 36, RecordingEvery: 600 * time.Millisecond})
	if rep != nil {
		var table strings.Builder
		rep.WriteFaults(&table)
		rep.WriteMarkdown(&table)
		t.Log("\n" + table.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Settled {
		t.Error("the run did not settle: the consumer kept messages pending or unacked")
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}
	if len(rep.Faults) != len(Kinds) {
		t.Errorf("%d faults, want %d", len(rep.Faults), len(Kinds))
	}
	acked := 0
	for _, row := range rep.Rows {
		acked += row.Acked
	}
	if acked == 0 {
		t.Error("no session was acknowledged")
	}
	ackedEvents := 0
	for _, row := range rep.Recording.Rows {
		ackedEvents += row.Acked
	}
	if ackedEvents == 0 {
		t.Error("no recording event was acknowledged")
	}
}
