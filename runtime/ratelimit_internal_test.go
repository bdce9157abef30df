package runtime

import (
	"testing"
	"time"

	"github.com/jetfn/jetfn/manifest"
)

// TestPaceGrant: a schedule idle for long grants one burst, then one
// message an interval; and a window of the rate's period never holds more
// than N plus a burst, however the grants are asked for.
func TestPaceGrant(t *testing.T) {
	p := newPace(manifest.Rate{N: 100, Per: time.Second}) // 10ms apart, bursts of 10
	if p.interval != 10*time.Millisecond || p.burst != 10 {
		t.Fatalf("pace %+v, want 10ms apart in bursts of 10", p)
	}
	now := int64(time.Hour)
	n, next, _ := p.grant(0, now, 50)
	if n != 10 || next != now+int64(10*time.Millisecond) {
		t.Fatalf("idle schedule granted %d (next %d), want a burst of 10 and the next slot one interval on", n, next-now)
	}
	if n, _, wait := p.grant(next, now, 5); n != 0 || wait != 10*time.Millisecond {
		t.Fatalf("right after the burst: %d granted, wait %s; want none for 10ms", n, wait)
	}
	if n, _, _ := p.grant(next, now+int64(35*time.Millisecond), 50); n != 3 {
		t.Fatalf("35ms later: %d granted, want 3 (at 10, 20 and 30ms)", n)
	}
	// Asked every millisecond for up to 7 for ten seconds: no one-second
	// window may see more than 100 + 10.
	var grants []int64
	next = 0
	for ms := int64(0); ms < 10_000; ms++ {
		at := now + ms*int64(time.Millisecond)
		var n int
		n, next, _ = p.grant(next, at, 7)
		for range n {
			grants = append(grants, at)
		}
	}
	for i := range grants {
		j := i
		for j < len(grants) && grants[j]-grants[i] < int64(time.Second) {
			j++
		}
		if j-i > 110 {
			t.Fatalf("%d messages in the second from %dms, want at most 110", j-i, (grants[i]-now)/int64(time.Millisecond))
		}
	}
	if len(grants) < 1000 || len(grants) > 1010 {
		t.Fatalf("%d messages in ten seconds at 100/s", len(grants))
	}
}

// TestPaceSlowRate: at 1/m the burst is one message.
func TestPaceSlowRate(t *testing.T) {
	p := newPace(manifest.Rate{N: 1, Per: time.Minute})
	if p.burst != 1 {
		t.Fatalf("burst %d, want 1", p.burst)
	}
	n, next, _ := p.grant(0, 0, 5)
	if n != 1 {
		t.Fatalf("granted %d, want 1", n)
	}
	if _, _, wait := p.grant(next, int64(time.Second), 5); wait != 59*time.Second {
		t.Fatalf("wait %s, want 59s", wait)
	}
}

// TestPaceIgnoresASlotFarAhead: a next slot further ahead than one
// interval (written under a slower rate, or by a clock far ahead) waits
// one interval, not until that slot.
func TestPaceIgnoresASlotFarAhead(t *testing.T) {
	p := newPace(manifest.Rate{N: 100, Per: time.Second})
	now := int64(time.Hour)
	if n, _, wait := p.grant(now+int64(time.Hour), now, 1); n != 0 || wait != 10*time.Millisecond {
		t.Fatalf("a slot an hour ahead: %d granted, wait %s; want a wait of one interval (10ms)", n, wait)
	}
}
