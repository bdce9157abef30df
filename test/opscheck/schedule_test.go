package opscheck

import (
	"reflect"
	"testing"
	"time"
)

// TestGenerateIsSeeded: one seed, one schedule; another seed, another.
func TestGenerateIsSeeded(t *testing.T) {
	a := Generate(7, time.Minute, 3, 1, DefaultWeights)
	b := Generate(7, time.Minute, 3, 1, DefaultWeights)
	if !reflect.DeepEqual(a, b) {
		t.Error("seed 7 generated two different schedules")
	}
	if c := Generate(8, time.Minute, 3, 1, DefaultWeights); reflect.DeepEqual(a.Ops, c.Ops) {
		t.Error("seeds 7 and 8 generated the same schedule")
	}
}

// TestGenerateMix: over a few long schedules every publisher, every kind
// of input and every nemesis kind with a weight shows up, and every
// revision passes jetfn's own checks, with the recording function ordered
// by recordingId, its partitions and its durable as in the base.
func TestGenerateMix(t *testing.T) {
	modes, poisons, kinds := map[Mode]int{}, map[Poison]int{}, map[Kind]int{}
	tabs := 0
	for seed := range uint64(5) {
		for _, op := range Generate(seed, 5*time.Minute, 3, 1, DefaultWeights).Ops {
			kinds[op.Kind]++
			if op.Input != nil {
				modes[op.Mode]++
				poisons[op.Input.Poison]++
				if op.Input.Tab {
					tabs++
				}
			}
			if op.Rev != nil {
				m, err := op.Rev.check(minWindow(), 1, false)
				if err != nil {
					t.Error(err)
					continue
				}
				if f := function(m, Recording); f != nil && (!f.Ordered || f.Key == nil || f.Key.Field != recordingKeyField ||
					f.Partitions != recordingPartitions || f.Durable != recordingName) {
					t.Errorf("revision %s: the recording function is not keyed as the shipped one, or renamed", op.Rev)
				}
			}
		}
	}
	for _, m := range []Mode{Careful, Bare, Double, Resend} {
		if modes[m] == 0 {
			t.Errorf("no %s publish", m)
		}
	}
	for _, p := range []Poison{Good, Schema, Empty, Status} {
		if poisons[p] == 0 {
			t.Errorf("no %q input", p)
		}
	}
	if tabs == 0 {
		t.Error("no input with a TAB header")
	}
	for _, k := range allKinds {
		if DefaultWeights[k] > 0 && kinds[k] == 0 {
			t.Errorf("no %s operation", k)
		}
	}
}
