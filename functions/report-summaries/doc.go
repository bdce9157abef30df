// Package reportsummaries is the report-summaries function: triggered by
// its schedule (manifest schedule:, docs/manifest.md), it counts the
// session summaries summarize-session stored in the window before the
// tick and publishes the count on report.summaries.
//
// Each tick is a message the server stores at the schedule's time; the
// handler reads the tick's time (msg.Published) as the window's end, so a
// tick retried or run late reports the same window. The count is a read,
// and the report's Nats-Msg-Id is the window's end, so a tick run twice
// (a retry after a crash before the ack) publishes one report while the
// output stream's duplicate window remembers it.
package reportsummaries
