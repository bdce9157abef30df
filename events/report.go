package events

import "time"

// SummariesReportSubject carries SummariesReport, once per tick of
// report-summaries' schedule.
const SummariesReportSubject = "report.summaries"

// SummariesReport counts the summaries stored in one window
// (SummariesReportPayload): those whose UpdatedAt is in [From, To).
type SummariesReport struct {
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Summaries int       `json:"summaries"`
	// Complete counts the summaries built from every published segment.
	Complete int `json:"complete"`
}
