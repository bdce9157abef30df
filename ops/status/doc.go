// Package status finds every running jetfn function instance through NATS
// micro discovery and renders them for `jetfn status`.
//
// Collect sends one $SRV.STATS request to all services and gathers every
// reply that arrives within a short window: there is no way to know how
// many instances will answer, so the window is the only end. A reply is
// kept when it comes from a jetfn function: its status endpoint's data is a
// wire.Stats naming the function, or its metadata carries the manifest
// digest that the runtime publishes. Other micro services on the same
// account are ignored.
package status
