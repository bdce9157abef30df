package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetfn/jetfn/wire"
)

// perFunction is one metric with the function as its only label, read
// from a wire.Stats snapshot.
type perFunction struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(wire.Stats) float64
	// only, when set, says which functions have the metric at all.
	only func(wire.Stats) bool
}

func counter(name, help string, value func(wire.Stats) uint64) perFunction {
	return perFunction{desc: prometheus.NewDesc(name, help, []string{"function"}, nil),
		kind: prometheus.CounterValue, value: func(s wire.Stats) float64 { return float64(value(s)) }}
}

func gauge(name, help string, value func(wire.Stats) float64) perFunction {
	return perFunction{desc: prometheus.NewDesc(name, help, []string{"function"}, nil),
		kind: prometheus.GaugeValue, value: value}
}

// when makes m a metric of the functions only picks alone.
func (m perFunction) when(only func(wire.Stats) bool) perFunction {
	m.only = only
	return m
}

func isRemote(s wire.Stats) bool    { return s.Remote != "" }
func isSingleton(s wire.Stats) bool { return s.Singleton != "" }
func isKeyed(s wire.Stats) bool     { return s.Partitions > 0 }
func isRouted(s wire.Stats) bool    { return s.Router != "" }
func hasKeyRate(s wire.Stats) bool  { return s.KeyRateLimit != "" }

// perFunctionMetrics are the metrics of one function, in exposition order.
var perFunctionMetrics = []perFunction{
	counter("jetfn_handled_total", "Messages whose handler ran to a result, per delivery.",
		func(s wire.Stats) uint64 { return s.Handled }),
	counter("jetfn_redeliveries_total", "Deliveries that were not a message's first.",
		func(s wire.Stats) uint64 { return s.Redeliveries }),
	counter("jetfn_heartbeats_total", "InProgress sent for messages whose handler was running.",
		func(s wire.Stats) uint64 { return s.Heartbeats }),
	counter("jetfn_buffer_heartbeats_total", "InProgress sent for pulled messages still waiting for a worker.",
		func(s wire.Stats) uint64 { return s.BufferBeats }),
	gauge("jetfn_in_flight", "Handlers running now.",
		func(s wire.Stats) float64 { return float64(s.InFlight) }),
	gauge("jetfn_consumer_pending", "Messages on the stream the function's consumer has not delivered yet.",
		func(s wire.Stats) float64 { return float64(s.NumPending) }),
	gauge("jetfn_consumer_ack_pending", "Messages delivered to the consumer (any instance) and not yet acknowledged.",
		func(s wire.Stats) float64 { return float64(s.NumAckPending) }),
	gauge("jetfn_consumer_lag", "Messages the function has not finished: pending plus acknowledgement pending, as the consumer's leader reports them (a KEDA scaling metric).",
		func(s wire.Stats) float64 { return float64(s.NumPending) + float64(s.NumAckPending) }),
	gauge("jetfn_consumer_missing",
		"1 while the function's durable consumer or its stream is missing on the server (nothing is handled), else 0.",
		func(s wire.Stats) float64 { return boolGauge(s.ConsumerError != "") }),
	counter("jetfn_duplicate_outputs_total",
		"Outputs the stream acknowledged as duplicates of an earlier message with the same ID.",
		func(s wire.Stats) uint64 { return s.DuplicateOutputs }),
	counter("jetfn_dead_letter_failures_total",
		"Dead letters the dead-letter stream did not store; each message was kept and retried, never terminated.",
		func(s wire.Stats) uint64 { return s.DeadLetterFailures }),
	counter("jetfn_abandoned_total",
		"Handler runs abandoned after the function's timeout (their messages settled as failures).",
		func(s wire.Stats) uint64 { return s.Abandoned }),
	gauge("jetfn_abandoned_running", "Abandoned handler runs that have not returned yet.",
		func(s wire.Stats) float64 { return float64(s.AbandonedRunning) }),
	gauge("jetfn_rate_held", "Messages pulled and waiting for their turn under the function's rateLimit (0 without one).",
		func(s wire.Stats) float64 { return float64(s.RateHeld) }),
	counter("jetfn_key_rate_deferred_total",
		"For a function with keyRateLimit: messages sent back to the server to wait for their key's turn.",
		func(s wire.Stats) uint64 { return s.KeyRateDeferred }).when(hasKeyRate),
	gauge("jetfn_key_rate_waiting", "For a function with keyRateLimit: messages this instance sent back that wait for their key's turn now.",
		func(s wire.Stats) float64 { return float64(s.KeyRateWaiting) }).when(hasKeyRate),
	counter("jetfn_ticks_skipped_total", "For a scheduled function: ticks its missed: policy skipped (they waited while no instance ran).",
		func(s wire.Stats) uint64 { return s.TicksSkipped }).when(func(s wire.Stats) bool { return s.Schedule != "" }),
	gauge("jetfn_paused", "1 while the function is paused on the server (jetfn pause), else 0: nothing is handled, and /readyz still passes.",
		func(s wire.Stats) float64 { return boolGauge(s.PausedUntil != nil) }),
	gauge("jetfn_singleton_active", "For a singleton function: 1 on the instance that pulls its messages now, 0 on those standing by.",
		func(s wire.Stats) float64 { return boolGauge(s.Singleton == "active") }).when(isSingleton),
	gauge("jetfn_keys_active", "For a keyed function: partitions with a message in flight on any instance, so keys being handled.",
		func(s wire.Stats) float64 { return float64(s.KeysActive) }).when(isKeyed),
	gauge("jetfn_held_by_key", "For a keyed function: stored messages waiting behind a message of their partition in flight.",
		func(s wire.Stats) float64 { return float64(s.HeldByKey) }).when(isKeyed),
	gauge("jetfn_stuck_keys", "For a keyed function: keys whose head message failed on this instance and waits for its retry.",
		func(s wire.Stats) float64 { return float64(len(s.StuckKeys)) }).when(isKeyed),
	gauge("jetfn_oldest_key_wait_seconds", "For a keyed function: how long ago the oldest message this instance holds was stored.",
		func(s wire.Stats) float64 { return s.OldestKeyWaitSeconds }).when(isKeyed),
	gauge("jetfn_router_pending", "For a keyed function whose key is in a header or a field: input messages not yet copied into partitions.",
		func(s wire.Stats) float64 { return float64(s.RouterPending) }).when(isRouted),
	gauge("jetfn_remote_instances",
		"Micro service instances the last discovery found serving a remote function's endpoint.",
		func(s wire.Stats) float64 { return float64(s.RemoteInstances) }).when(isRemote),
	gauge("jetfn_remote_unanswered", "1 while a remote function's endpoint has no responders (/readyz fails).",
		func(s wire.Stats) float64 { return boolGauge(s.RemoteError != "") }).when(isRemote),
}

// descOutcomes has a second label, the outcome, so it is not a perFunction.
var descOutcomes = prometheus.NewDesc("jetfn_outcomes_total",
	"What jetfn told JetStream after a handler result: acked, retried, termed, dead_lettered. A dead-lettered message is also termed.",
	[]string{"function", "outcome"}, nil)

// statsCollector turns a wire.Stats snapshot into metrics at scrape time,
// so the counters have one home: the runtime.
type statsCollector struct{ src StatsSource }

var _ prometheus.Collector = statsCollector{}

func (statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOutcomes
	for _, m := range perFunctionMetrics {
		ch <- m.desc
	}
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.src.Stats() {
		for outcome, v := range outcomes(s) {
			ch <- prometheus.MustNewConstMetric(descOutcomes, prometheus.CounterValue, float64(v), s.Function, outcome)
		}
		for _, m := range perFunctionMetrics {
			if m.only != nil && !m.only(s) {
				continue
			}
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(s), s.Function)
		}
	}
}

// boolGauge is 1 for true, 0 for false.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func outcomes(s wire.Stats) map[string]uint64 {
	return map[string]uint64{"acked": s.Acked, "retried": s.Retried, "termed": s.Termed, "dead_lettered": s.DeadLettered}
}
