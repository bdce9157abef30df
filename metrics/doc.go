// Package metrics serves a runtime's Prometheus metrics and its health on
// one HTTP listener (METRICS_ADDR), for `jetfn run`.
//
// Create Metrics with New before the runtime, so its handler-duration
// histogram can be passed as runtime.WithHandlerObserver(m.ObserveHandler);
// then Serve it with the runtime. The counters are not kept twice: a
// collector reads wire.Stats on every scrape, the same figures `nats
// micro stats` shows. Serve listens at once (a taken port fails start-up)
// and serves until Close, which shuts the listener down and waits for it.
//
//	/metrics  Prometheus text format
//	/healthz  200 while the process serves HTTP
//	/readyz   200 once every function is bound, NATS is connected and
//	          MongoDB answers a ping; 503 listing what is not
package metrics
