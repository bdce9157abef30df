package keyed

import (
	"context"
	"testing"
	"time"
)

// TestEveryVariantDrainsTheBacklog runs each variant on a small backlog:
// Run returns only once every message was handled, so a variant that
// loses or never reaches some (a wrong partition filter, say) fails here
// within the test's deadline instead of hanging the benchmark.
func TestEveryVariantDrainsTheBacklog(t *testing.T) {
	variants := []string{Unordered, Ordered, Routed, Partitioned, IngestPartitioned, CopyCeiling, IngestCeiling}
	cfg := Config{Messages: 400, Keys: 20, Concurrency: 4, Repetitions: 1, Variants: variants}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	samples, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != len(variants) {
		t.Fatalf("%d samples, want one per variant (%d)", len(samples), len(variants))
	}
	for _, s := range samples {
		if s.Elapsed <= 0 || s.CPUPerMsg <= 0 {
			t.Errorf("%s: elapsed %v, CPU/msg %v: not measured", s.Variant, s.Elapsed, s.CPUPerMsg)
		}
	}
}
