package metrics

import (
	"net/http"
	"time"

	"github.com/jetfn/jetfn/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// durationBuckets reach from a millisecond handler to one near a typical
// manifest timeout (minutes), in seconds.
var durationBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics is a process's Prometheus registry: Go and process metrics, the
// handler-duration histogram and, once served, the runtime's counters.
type Metrics struct {
	reg       *prometheus.Registry
	durations *prometheus.HistogramVec
}

// New makes the registry with the histogram, ready for ObserveHandler.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jetfn_handler_duration_seconds",
			Help:    "How long a function's handler ran, per message delivery.",
			Buckets: durationBuckets,
		}, []string{"function"}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.durations,
	)
	return m
}

// ObserveHandler records one handler run; pass it to
// runtime.WithHandlerObserver.
func (m *Metrics) ObserveHandler(function string, d time.Duration) {
	m.durations.WithLabelValues(function).Observe(d.Seconds())
}

// StatsSource is what the collector reads on a scrape: *runtime.Runtime.
type StatsSource interface {
	Stats() []wire.Stats
}

// Register adds the collector that reads src's counters on every scrape.
func (m *Metrics) Register(src StatsSource) error {
	return m.reg.Register(statsCollector{src: src})
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
