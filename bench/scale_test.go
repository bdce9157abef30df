package bench

import (
	"bytes"
	"context"
	"image/png"
	"testing"
	"time"
)

// TestScaleSmall runs each scale curve but the CLI's ceiling with tiny
// counts and draws their chart, so the scale bench keeps working. It
// checks what must hold at any size (nothing redelivered, nothing run
// twice, every figure measured), never how fast.
func TestScaleSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nats-server and child processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var r ScaleResults
	var err error
	quiet := func(string) {}
	if r.Idle, err = RunIdle(ctx, []int{2}, 2*time.Second, t.TempDir(), quiet); err != nil {
		t.Fatal(err)
	}
	for _, row := range r.Idle {
		// nats.go's Consume may well send nothing in two seconds; jetfn pulls
		// every second.
		if (row.Variant == variantIdleJetfn && row.Requests == 0) || row.Ready <= 0 || row.PeakRSSKB <= 0 {
			t.Errorf("idle row not measured: %+v", row)
		}
	}
	if r.Held, err = RunHeld(ctx, []int{5, 20}, 3*time.Second, "", quiet); err != nil {
		t.Fatal(err)
	}
	for _, row := range r.Held {
		if row.Redelivered != 0 || row.InProgress == 0 || row.HeapKB == 0 || row.StackKB == 0 || row.Goroutines < row.Held {
			t.Errorf("held row: %+v", row)
		}
	}
	if _, ok := PerHeldMessage(r.Held); !ok {
		t.Error("no cost per held message from two counts")
	}
	if r.Backlog, err = RunBacklog(ctx, []int{2000}, quiet); err != nil {
		t.Fatal(err)
	}
	if len(r.Backlog[0].Tenths) != 10 {
		t.Errorf("backlog tenths: %v", r.Backlog[0].Tenths)
	}
	if r.Instances, err = RunInstances(ctx, []int{2}, 2000, quiet); err != nil {
		t.Fatal(err)
	}
	if twice := r.Instances[0].RunTwice(); twice != 0 {
		t.Errorf("%d messages ran twice across two instances", twice)
	}
	var chart bytes.Buffer
	if err := WriteScaleChart(&chart, r); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&chart); err != nil {
		t.Errorf("scale chart is not a PNG: %v", err)
	}
}

// TestScaleChartPanels draws a panel per curve measured, and refuses a run
// that measured none.
func TestScaleChartPanels(t *testing.T) {
	if err := WriteScaleChart(&bytes.Buffer{}, ScaleResults{}); err == nil {
		t.Error("drew a chart of nothing")
	}
	r := ScaleResults{
		Idle: []IdleRow{
			{Variant: variantIdleRaw, Functions: 1, Idle: time.Second, Requests: 1, CPU: time.Millisecond, PeakRSSKB: 1 << 15},
			{Variant: variantIdleJetfn, Functions: 1, Idle: time.Second, Requests: 10, CPU: time.Millisecond, PeakRSSKB: 1 << 15},
			{Variant: variantIdleRaw, Functions: 10, Idle: time.Second, Requests: 3, CPU: time.Millisecond, PeakRSSKB: 1 << 15},
			{Variant: variantIdleJetfn, Functions: 10, Idle: time.Second, Requests: 100, CPU: time.Millisecond, PeakRSSKB: 1 << 16},
		},
		Held:      []HeldRow{{Held: 10, RSSKB: 1 << 15, HeapKB: 1 << 12, StackKB: 1 << 10}, {Held: 100, RSSKB: 1 << 16, HeapKB: 1 << 13, StackKB: 1 << 11}},
		Backlog:   []BacklogRow{{Messages: 100, Tenths: tenths(time.Millisecond), RSSKB: make([]int64, 10)}},
		Instances: []InstancesRow{{Instances: 1, Messages: 100, Took: time.Second}, {Instances: 2, Messages: 100, Took: time.Second}},
	}
	panels, err := scalePanels(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(panels) != 6 {
		t.Errorf("%d panels, want 6 (three idle, held, backlog, instances)", len(panels))
	}
	r.Idle, r.Held = nil, nil
	if panels, _ = scalePanels(r); len(panels) != 2 {
		t.Errorf("%d panels without the idle and held curves, want 2", len(panels))
	}
	var chart bytes.Buffer
	if err := WriteScaleChart(&chart, r); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&chart); err != nil {
		t.Errorf("not a PNG: %v", err)
	}
}

func tenths(d time.Duration) []time.Duration {
	out := make([]time.Duration, 10)
	for i := range out {
		out[i] = d
	}
	return out
}
