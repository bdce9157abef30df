package crash

import (
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCrashMatrix is the short version of `go tool task crash`: two runs
// per kill point with a 1s quiet period, the scaled-down long-outage pair
// (5s window, 7s outage) and the long outage with a nats-server restart,
// two runs of three careless-publisher sessions, one max-deliveries-all-down
// run, two runs of each remote point (the remote killed mid-request, jetfn
// killed while the remote works, with the Go remote example), short
// batches with a child kill, a nats-server restart and a Mongo outage, the
// three ordered rows, 8 keys x 30 messages each, checked per key for
// stream order and each effect once (3 SIGKILLs at random moments; a
// second instance joining, the first SIGKILLed and joining again, the
// second leaving; a message failing 3 times and holding its key), and the
// two routed rows, the same keys and messages keyed by header Order-Key,
// so that jetfn's router copies them (2 SIGKILLs of the router while it
// copies, plus a message without the key, dead-lettered once; the
// instances row's steps with the routing instance SIGKILLed and SIGTERMed
// while it copies), and the scheduled row, a function ticking every
// second SIGKILLed in the middle of 4 ticks (its effect applied, its ack
// held by the proxy), each tick's effect wanted once with its output, and
// the debounced row, 8 keys x 3 rounds of a 4-message burst debounced by
// 1s, with 3 SIGKILLs, each burst's last message wanted once, and the
// rewound row, the ordered rows' messages handled, rewound to the first
// with `jetfn rewind` and handled again through 2 SIGKILLs, each once in
// effect and output. It builds and runs the real jetfn binary; about 4m40s
// on two cores, of which the ordered rows take about 20s, the routed rows
// about 30s (each SIGKILL of the router stops the routing for up to its
// lease's 5s), the scheduled, debounced and rewound rows about 10s each.
//
// CRASH_BUILD_FLAGS adds `go build` flags for the child (say -race).
func TestCrashMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("builds jetfn and kills it for over three minutes")
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := New(t.Context(), Options{
		Dir: t.TempDir(), Quiet: time.Second, Log: log,
		BuildFlags: strings.Fields(os.Getenv("CRASH_BUILD_FLAGS")),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	rep := RunSuite(t.Context(), h, SuiteOptions{
		Runs: 2, ShortWindow: 5 * time.Second, Outage: 7 * time.Second,
		CarelessSessions: 3, ExhaustionRuns: 1,
		BatchSessions: 16, BatchCycles: 3,
		ServerCycles: 1, NATSDown: 2 * time.Second, MongoDown: 12 * time.Second,
		OrderedKeys: 8, OrderedMessages: 30, OrderedKills: 3, OrderedFailures: 3,
		RoutedKills: 2, ScheduledKills: 4,
		DebouncedKills: 3, DebouncedRounds: 3, DebouncedMessages: 4, RewoundKills: 2,
	})
	var table strings.Builder
	rep.Write(&table)
	t.Log("\n" + table.String())
	for _, r := range rep.Rows {
		for _, p := range r.Problems() {
			t.Errorf("%s: %s", r.Point, p)
		}
	}
	if len(rep.Rows) != 22 {
		t.Errorf("%d rows, want 22 (7 points, 2 remote points, careless-publisher, max-deliveries-all-down, 3 batches, "+
			"3 ordered rows, 2 routed rows, the scheduled, debounced and rewound rows)", len(rep.Rows))
	}
}
