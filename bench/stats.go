package bench

import (
	"math"
	"slices"
	"time"
)

// sample is one repetition of one variant.
type sample struct {
	rate         float64
	p50, p99     time.Duration
	allocsPerMsg float64
	// writesPerMsg is the consumer's write system calls per message.
	writesPerMsg float64
	bytesPerMsg  float64
	cpuPerMsg    time.Duration
	peakRSSMB    float64
	// What the server and the ack observer saw (see loadResult).
	redeliveries, redeliveredAcks, inProgress, acked int
	elapsed                                          time.Duration
	// latencies is how many publish-to-ack latencies p50 and p99 are over.
	latencies int
}

func newSample(res loadResult, rep childReport, n int) sample {
	lat := slices.Clone(res.latencies)
	slices.Sort(lat)
	return sample{
		rate: res.rate, p50: percentile(lat, 50), p99: percentile(lat, 99),
		allocsPerMsg: float64(rep.Mallocs) / float64(n),
		writesPerMsg: float64(rep.WriteSyscalls) / float64(n),
		bytesPerMsg:  float64(rep.AllocBytes) / float64(n),
		cpuPerMsg:    rep.CPU / time.Duration(n),
		peakRSSMB:    float64(rep.PeakRSSKB) / 1024,
		redeliveries: res.redeliveries, redeliveredAcks: res.redeliveredAcks,
		inProgress: res.inProgress, acked: res.acked, elapsed: res.elapsed, latencies: len(lat),
	}
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100 // ceil(n*p/100)
	return sorted[max(rank, 1)-1]
}

// median of the values; the mean of the middle two for an even count.
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	mid := len(v) / 2
	if len(v)%2 == 0 {
		return (v[mid-1] + v[mid]) / 2
	}
	return v[mid]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Stats are one variant's medians over a case's repetitions.
type Stats struct {
	Rate         float64 // messages (sessions) acked per second
	P50Millis    float64 // publish to ack
	P99Millis    float64
	CPUMicros    float64 // consumer process CPU (user + system) per message
	AllocsPerMsg float64 // consumer process only
	WritesPerMsg float64 // consumer process's write system calls
	BytesPerMsg  float64
	PeakRSSMB    float64 // consumer process high-water mark
	// Redeliveries are the server's (cumulative; see loadResult),
	// RedeliveredAcks the acks of redelivered copies, InProgress the +WPI
	// the consumer sent, Acked the messages acked at least once, Seconds
	// the time from the first publish to the last ack (the drain rows:
	// from the first ack to the ack floor at the last message).
	Redeliveries, RedeliveredAcks, InProgress, Acked, Seconds float64
	// Latencies is how many messages P50Millis and P99Millis are over:
	// those acked after warm-up; 0 in the drain rows, which have none.
	Latencies float64
}

func medianStats(samples []sample) Stats {
	pick := func(f func(sample) float64) float64 {
		v := make([]float64, len(samples))
		for i, s := range samples {
			v[i] = f(s)
		}
		return median(v)
	}
	return Stats{
		Rate:            pick(func(s sample) float64 { return s.rate }),
		P50Millis:       pick(func(s sample) float64 { return ms(s.p50) }),
		P99Millis:       pick(func(s sample) float64 { return ms(s.p99) }),
		CPUMicros:       pick(func(s sample) float64 { return float64(s.cpuPerMsg) / float64(time.Microsecond) }),
		AllocsPerMsg:    pick(func(s sample) float64 { return s.allocsPerMsg }),
		WritesPerMsg:    pick(func(s sample) float64 { return s.writesPerMsg }),
		BytesPerMsg:     pick(func(s sample) float64 { return s.bytesPerMsg }),
		PeakRSSMB:       pick(func(s sample) float64 { return s.peakRSSMB }),
		Redeliveries:    pick(func(s sample) float64 { return float64(s.redeliveries) }),
		RedeliveredAcks: pick(func(s sample) float64 { return float64(s.redeliveredAcks) }),
		InProgress:      pick(func(s sample) float64 { return float64(s.inProgress) }),
		Acked:           pick(func(s sample) float64 { return float64(s.acked) }),
		Seconds:         pick(func(s sample) float64 { return s.elapsed.Seconds() }),
		Latencies:       pick(func(s sample) float64 { return float64(s.latencies) }),
	}
}

// Paired compares each of jetfn's repetitions with the baseline's of the
// same pair, run back to back, and takes the median over the pairs. This
// machine's speed drifts by a fifth over minutes, the same for both
// variants of a pair; the quotient of two medians picked from different
// pairs carries that drift, the median of the pairs' own ratios does not.
type Paired struct {
	// Rate, P50, P99, CPU and Allocs are jetfn's figure over the baseline's.
	Rate, P50, P99, CPU, Allocs float64
	// AddedP99Millis is jetfn's p99 minus the baseline's, in milliseconds.
	AddedP99Millis float64
	// RateRange and AddedP99Range hold the true median of the pairs'
	// throughput ratio and p99 difference with the probability medianRange
	// gives for the number of pairs; zero with fewer than two.
	RateRange, AddedP99Range [2]float64
	// Rates and AddedP99s are the pairs' own throughput ratios and p99
	// differences, in pair order, for resampledMet.
	Rates, AddedP99s []float64
}

func pairedStats(base, jetfn []sample) Paired {
	n := min(len(base), len(jetfn))
	ratios := func(f func(sample) float64) []float64 {
		var v []float64
		for i := range n {
			if b := f(base[i]); b != 0 {
				v = append(v, f(jetfn[i])/b)
			}
		}
		return v
	}
	added := make([]float64, n)
	for i := range n {
		added[i] = ms(jetfn[i].p99) - ms(base[i].p99)
	}
	rates := ratios(func(s sample) float64 { return s.rate })
	p := Paired{
		Rate:           median(rates),
		P50:            median(ratios(func(s sample) float64 { return ms(s.p50) })),
		P99:            median(ratios(func(s sample) float64 { return ms(s.p99) })),
		CPU:            median(ratios(func(s sample) float64 { return float64(s.cpuPerMsg) })),
		Allocs:         median(ratios(func(s sample) float64 { return s.allocsPerMsg })),
		AddedP99Millis: median(added),
		Rates:          rates,
		AddedP99s:      added,
	}
	p.RateRange, _ = medianRange(rates)
	p.AddedP99Range, _ = medianRange(added)
	return p
}

// medianRange is a confidence interval for the median that assumes
// nothing about the distribution: of n values, the k-th smallest and the
// k-th largest hold the true median with probability 1 − 2·P(B < k), B
// binomial(n, ½). It takes the largest k that keeps that at 95 % or more,
// or k = 1 (smallest to largest) when none does: 9 pairs give the 2nd to
// the 8th value, 96.1 %; 5 pairs the whole range, 93.8 %.
func medianRange(values []float64) (lohi [2]float64, coverage float64) {
	n := len(values)
	if n < 2 {
		return lohi, 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	k := medianRank(n)
	return [2]float64{v[k-1], v[n-k]}, medianCoverage(n, k)
}

// medianRank is the k medianRange takes for n values.
func medianRank(n int) int {
	k := 1
	for k+1 <= n/2 && medianCoverage(n, k+1) >= 0.95 {
		k++
	}
	return k
}

// medianCoverage is 1 − 2·P(B < k) for B binomial(n, ½): how often the
// k-th smallest to the k-th largest of n values hold the true median.
func medianCoverage(n, k int) float64 {
	below, choose := 0.0, 1.0 // choose is C(n, j)
	for j := range k {
		below += choose
		choose = choose * float64(n-j) / float64(j+1)
	}
	return 1 - 2*below/math.Pow(2, float64(n))
}
