package console

import (
	"sync"
	"time"

	"github.com/jetfn/jetfn/ops/status"
)

// historyLen is how many rate samples each function keeps for its chart:
// two minutes at the default interval.
const historyLen = 60

// rates turns the handled counters of successive polls into messages per
// second, per function, with a short history. Instances come and go: a
// new one's first poll counts nothing, and one that restarted (its counter
// went down) counts from zero.
type rates struct {
	mu      sync.Mutex
	last    map[string]sample    // by instance ID
	history map[string][]float64 // by function, oldest first
}

type sample struct {
	handled uint64
	at      time.Time
}

func newRates() *rates {
	return &rates{last: map[string]sample{}, history: map[string][]float64{}}
}

// observe records one poll taken at `at` and returns each function's rate
// and each instance's.
func (r *rates) observe(at time.Time, instances []status.Instance) (byFunction, byInstance map[string]float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byFunction, byInstance = map[string]float64{}, map[string]float64{}
	seen := map[string]sample{}
	for _, in := range instances {
		now := sample{handled: in.Stats.Handled, at: at}
		seen[in.ID] = now
		byFunction[in.Function] += 0
		prev, ok := r.last[in.ID]
		if !ok || !at.After(prev.at) {
			continue
		}
		delta := now.handled
		if now.handled >= prev.handled {
			delta -= prev.handled
		}
		rate := float64(delta) / at.Sub(prev.at).Seconds()
		byInstance[in.ID] = rate
		byFunction[in.Function] += rate
	}
	r.last = seen
	for fn, rate := range byFunction {
		h := append(r.history[fn], rate)
		if len(h) > historyLen {
			h = h[len(h)-historyLen:]
		}
		r.history[fn] = h
	}
	return byFunction, byInstance
}

// historyOf is a copy of the function's rate history, oldest first.
func (r *rates) historyOf(function string) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]float64(nil), r.history[function]...)
}
