package crash

import (
	"context"
	"slices"
	"time"
)

// SuiteOptions size one pass over every point and batch.
type SuiteOptions struct {
	// Runs per single-session point, per remote point, and of
	// careless-publisher.
	Runs int
	// ShortWindow and Outage are the scaled-down long-outage pair: the
	// child stays down for Outage, longer than ShortWindow.
	ShortWindow, Outage time.Duration
	// CarelessSessions are published per run of careless-publisher; zero
	// skips the row.
	CarelessSessions int
	// ExhaustionRuns are the runs of max-deliveries-all-down; zero skips
	// the row.
	ExhaustionRuns int
	// BatchSessions per cycle and BatchCycles of the random-kill batch.
	BatchSessions, BatchCycles int
	// ServerCycles is how often the NATS and Mongo batches restart their
	// server, each down for NATSDown or MongoDown. NATSDown is also how
	// long nats-server is down inside the outage of
	// after-notify/nats-restart/window-24h.
	ServerCycles        int
	NATSDown, MongoDown time.Duration
	// OrderedKeys keys of OrderedMessages messages each are published in
	// each ordered row; zero skips those rows. OrderedKills are the
	// SIGKILLs of ordered-random-kill, OrderedFailures how many deliveries
	// the failing message of ordered-failing-key fails (zero skips that
	// row).
	OrderedKeys, OrderedMessages  int
	OrderedKills, OrderedFailures int
	// OrderedKeying, when set, replaces the ordered rows' `ordered: true`
	// (OrderedKeying), the routed rows' too: "keyConcurrency: 4" or "none"
	// are controls that the checker must fail.
	OrderedKeying string
	// RoutedKills are the SIGKILLs of ordered-routed-random-kill (zero
	// skips it), each followed by up to 5 s without routing (the router's
	// lease); RoutedKey is where the routed rows' key is, RoutedByHeader
	// (the default) or RoutedByField, or RoutedBySubject, a control the
	// checker must fail. The routed rows run with the ordered rows' keys
	// and messages.
	RoutedKills int
	RoutedKey   string
	// ScheduledKills are the SIGKILLs of scheduled-tick-kill, each in the
	// middle of a tick (zero skips it).
	ScheduledKills int
	// DebouncedKills are the SIGKILLs of debounced-random-kill (zero skips
	// it), which publishes DebouncedRounds rounds of a burst of
	// DebouncedMessages messages for each of OrderedKeys keys.
	DebouncedKills, DebouncedRounds, DebouncedMessages int
	// RewoundKills are the SIGKILLs of rewound-replay-kill during its
	// replay (zero skips it); it runs OrderedKeys x OrderedMessages
	// messages.
	RewoundKills int
	// Only, when set, names the rows to run (point names, outage for every
	// point with an outage, the remote points' names, careless-publisher,
	// max-deliveries-all-down, random, nats-restart, mongo-outage,
	// ordered-random-kill, ordered-instances, ordered-failing-key,
	// ordered-routed-random-kill, ordered-routed-instances,
	// scheduled-tick-kill, debounced-random-kill, rewound-replay-kill).
	Only []string
}

func (o SuiteOptions) selected(name string) bool {
	return len(o.Only) == 0 || slices.Contains(o.Only, name)
}

// RunSuite runs every selected point, row and batch in order, then the
// report.
func RunSuite(ctx context.Context, h *Harness, o SuiteOptions) Report {
	start := time.Now()
	var rep Report
	add := func(run func() Row) {
		t := time.Now()
		row := run()
		row.Wall = time.Since(t)
		rep.Rows = append(rep.Rows, row)
	}
	for _, p := range Points(o.ShortWindow, o.Outage, o.NATSDown) {
		if o.selected(p.Name) || (o.selected("outage") && p.Outage > 0) {
			add(func() Row { return h.RunPoint(ctx, p, o.Runs) })
		}
	}
	for _, p := range RemotePoints() {
		if o.selected(p.Name) {
			add(func() Row { return h.RunRemotePoint(ctx, p, o.Runs) })
		}
	}
	if o.selected(carelessName) && o.CarelessSessions > 0 {
		add(func() Row { return h.RunCareless(ctx, Careless{Runs: o.Runs, Sessions: o.CarelessSessions}) })
	}
	if o.selected(exhaustName) && o.ExhaustionRuns > 0 {
		add(func() Row { return h.RunExhaustion(ctx, DefaultExhaustion(o.ExhaustionRuns)) })
	}
	batches := []Batch{
		{Disrupt: KillChild, Sessions: o.BatchSessions, Cycles: o.BatchCycles},
		{Disrupt: RestartNATS, Sessions: o.BatchSessions, Cycles: o.ServerCycles, Down: o.NATSDown},
		{Disrupt: RestartMongo, Sessions: o.BatchSessions, Cycles: o.ServerCycles, Down: o.MongoDown},
	}
	for _, b := range batches {
		if o.selected(b.Disrupt.String()) && b.Cycles > 0 {
			add(func() Row { return h.RunBatch(ctx, b) })
		}
	}
	if o.OrderedKeys > 0 {
		routed := o.RoutedKey
		if routed == "" {
			routed = RoutedByHeader
		}
		ordered := []Ordered{
			{Kind: OrderedKill, Kills: o.OrderedKills},
			{Kind: OrderedInstances},
			{Kind: OrderedFailing, Failures: o.OrderedFailures},
			{Kind: OrderedKill, Kills: o.RoutedKills, Routed: routed, Keyless: true},
			{Kind: OrderedInstances, Routed: routed},
		}
		for _, r := range ordered {
			r.Keys, r.Messages, r.Keying = o.OrderedKeys, o.OrderedMessages, o.OrderedKeying
			if o.selected(r.name()) && (r.Kind != OrderedKill || r.Kills > 0) && (r.Kind != OrderedFailing || r.Failures > 0) {
				add(func() Row { return h.RunOrdered(ctx, r) })
			}
		}
	}
	if o.selected(scheduledName) && o.ScheduledKills > 0 {
		add(func() Row { return h.RunScheduled(ctx, o.ScheduledKills) })
	}
	if o.selected(debouncedName) && o.DebouncedKills > 0 && o.OrderedKeys > 0 {
		d := Debounced{Keys: o.OrderedKeys, Messages: max(o.DebouncedMessages, 1), Rounds: max(o.DebouncedRounds, 1), Kills: o.DebouncedKills}
		add(func() Row { return h.RunDebounced(ctx, d) })
	}
	if o.selected(rewoundName) && o.RewoundKills > 0 && o.OrderedKeys > 0 {
		rw := Rewound{Keys: o.OrderedKeys, Messages: max(o.OrderedMessages, 1), Kills: o.RewoundKills}
		add(func() Row { return h.RunRewound(ctx, rw) })
	}
	rep.Wall = time.Since(start)
	return rep
}
