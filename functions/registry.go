// Package functions is the one list of functions compiled into jetfn. A
// manifest may bind any of them by name; one it does not name is not bound.
// Adding a function is a package under functions/ plus a line here.
package functions

import (
	"github.com/jetfn/jetfn"
	publishrecordingevent "github.com/jetfn/jetfn/functions/publish-recording-event"
	reportsummaries "github.com/jetfn/jetfn/functions/report-summaries"
	summarizesession "github.com/jetfn/jetfn/functions/summarize-session"
)

// All returns every compiled-in function.
func All() []jetfn.Function {
	return []jetfn.Function{
		{Name: summarizesession.Name, New: summarizesession.New, CheckConfig: summarizesession.CheckConfig},
		{Name: publishrecordingevent.Name, New: publishrecordingevent.New, CheckConfig: publishrecordingevent.CheckConfig},
		{Name: reportsummaries.Name, New: reportsummaries.New, CheckConfig: reportsummaries.CheckConfig},
	}
}
