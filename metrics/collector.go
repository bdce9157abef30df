package metrics

import (
	"github.com/jetfn/jetfn/wire"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descHandled = prometheus.NewDesc("jetfn_handled_total",
		"Messages whose handler ran to a result, per delivery.", []string{"function"}, nil)
	descOutcomes = prometheus.NewDesc("jetfn_outcomes_total",
		"What jetfn told JetStream after a handler result: acked, retried, termed, dead_lettered. A dead-lettered message is also termed.",
		[]string{"function", "outcome"}, nil)
	descRedeliveries = prometheus.NewDesc("jetfn_redeliveries_total",
		"Deliveries that were not a message's first.", []string{"function"}, nil)
	descHeartbeats = prometheus.NewDesc("jetfn_heartbeats_total",
		"InProgress sent for messages whose handler was running.", []string{"function"}, nil)
	descBufferBeats = prometheus.NewDesc("jetfn_buffer_heartbeats_total",
		"InProgress sent for pulled messages still waiting for a worker.", []string{"function"}, nil)
	descInFlight = prometheus.NewDesc("jetfn_in_flight",
		"Handlers running now.", []string{"function"}, nil)
	descPending = prometheus.NewDesc("jetfn_consumer_pending",
		"Messages on the stream the function's consumer has not delivered yet.", []string{"function"}, nil)
	descAckPending = prometheus.NewDesc("jetfn_consumer_ack_pending",
		"Messages delivered to the consumer (any instance) and not yet acknowledged.", []string{"function"}, nil)
	descConsumerMissing = prometheus.NewDesc("jetfn_consumer_missing",
		"1 while the function's durable consumer or its stream is missing on the server (nothing is handled), else 0.",
		[]string{"function"}, nil)
	descDuplicateOutputs = prometheus.NewDesc("jetfn_duplicate_outputs_total",
		"Outputs the stream acknowledged as duplicates of an earlier message with the same ID.", []string{"function"}, nil)
	descDeadLetterFailures = prometheus.NewDesc("jetfn_dead_letter_failures_total",
		"Dead letters the dead-letter stream did not store; each message was kept and retried, never terminated.", []string{"function"}, nil)
	descAbandoned = prometheus.NewDesc("jetfn_abandoned_total",
		"Handler runs abandoned after the function's timeout (their messages settled as failures).", []string{"function"}, nil)
	descAbandonedRunning = prometheus.NewDesc("jetfn_abandoned_running",
		"Abandoned handler runs that have not returned yet.", []string{"function"}, nil)
	descRemoteInstances = prometheus.NewDesc("jetfn_remote_instances",
		"Micro service instances the last discovery found serving a remote function's endpoint.", []string{"function"}, nil)
	descRemoteUnanswered = prometheus.NewDesc("jetfn_remote_unanswered",
		"1 while a remote function's endpoint has no responders (/readyz fails).", []string{"function"}, nil)
)

// statsCollector turns a wire.Stats snapshot into metrics at scrape time,
// so the counters have one home: the runtime.
type statsCollector struct{ src StatsSource }

var _ prometheus.Collector = statsCollector{}

func (statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHandled, descOutcomes, descRedeliveries, descHeartbeats,
		descBufferBeats, descInFlight, descPending, descAckPending, descConsumerMissing, descDuplicateOutputs,
		descDeadLetterFailures, descAbandoned, descAbandonedRunning, descRemoteInstances, descRemoteUnanswered} {
		ch <- d
	}
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.src.Stats() {
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{s.Function}, labels...)...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, s.Function)
		}
		counter(descHandled, s.Handled)
		for outcome, v := range outcomes(s) {
			counter(descOutcomes, v, outcome)
		}
		counter(descRedeliveries, s.Redeliveries)
		counter(descHeartbeats, s.Heartbeats)
		counter(descBufferBeats, s.BufferBeats)
		gauge(descInFlight, float64(s.InFlight))
		gauge(descPending, float64(s.NumPending))
		gauge(descAckPending, float64(s.NumAckPending))
		gauge(descConsumerMissing, boolGauge(s.ConsumerError != ""))
		counter(descDuplicateOutputs, s.DuplicateOutputs)
		counter(descDeadLetterFailures, s.DeadLetterFailures)
		counter(descAbandoned, s.Abandoned)
		gauge(descAbandonedRunning, float64(s.AbandonedRunning))
		if s.Remote != "" {
			gauge(descRemoteInstances, float64(s.RemoteInstances))
			gauge(descRemoteUnanswered, boolGauge(s.RemoteError != ""))
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
