package crash

import (
	"context"
	"slices"
	"time"
)

// SuiteOptions size one pass over every point and batch.
type SuiteOptions struct {
	// Runs per single-session point.
	Runs int
	// ShortWindow and Outage are the scaled-down long-outage pair: the
	// child stays down for Outage, longer than ShortWindow.
	ShortWindow, Outage time.Duration
	// BatchSessions per cycle and BatchCycles of the random-kill batch.
	BatchSessions, BatchCycles int
	// ServerCycles is how often the NATS and Mongo batches restart their
	// server, each down for NATSDown or MongoDown.
	ServerCycles        int
	NATSDown, MongoDown time.Duration
	// Only, when set, names the rows to run (point names, or random,
	// nats-restart, mongo-outage).
	Only []string
}

// RunSuite runs every selected point and batch in order, then the report.
func RunSuite(ctx context.Context, h *Harness, o SuiteOptions) Report {
	start := time.Now()
	var rep Report
	selected := func(name string) bool { return len(o.Only) == 0 || slices.Contains(o.Only, name) }
	for _, p := range Points(o.ShortWindow, o.Outage) {
		if !selected(p.Name) && !(selected("outage") && p.Outage > 0) {
			continue
		}
		t := time.Now()
		row := h.RunPoint(ctx, p, o.Runs)
		row.Wall = time.Since(t)
		rep.Rows = append(rep.Rows, row)
	}
	batches := []Batch{
		{Disrupt: KillChild, Sessions: o.BatchSessions, Cycles: o.BatchCycles},
		{Disrupt: RestartNATS, Sessions: o.BatchSessions, Cycles: o.ServerCycles, Down: o.NATSDown},
		{Disrupt: RestartMongo, Sessions: o.BatchSessions, Cycles: o.ServerCycles, Down: o.MongoDown},
	}
	for _, b := range batches {
		if !selected(b.Disrupt.String()) || b.Cycles == 0 {
			continue
		}
		t := time.Now()
		row := h.RunBatch(ctx, b)
		row.Wall = time.Since(t)
		rep.Rows = append(rep.Rows, row)
	}
	rep.Wall = time.Since(start)
	return rep
}
