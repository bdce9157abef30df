// Package orderrun is the record of one handler run that the crash
// harness's order recorder (test/crash/orderrecorder) stores and the order
// checker (test/crash) reads back: one type, so the writer and the reader
// cannot drift apart.
package orderrun

import "time"

// Collection holds one Run per run the recorder saw, failed runs too.
const Collection = "ordered_runs"

// Run is one run of the recorder's handler.
type Run struct {
	Key string `bson:"key"`
	// Seq is the message's stream sequence (Jetfn-Stream-Seq); Delivery
	// its Jetfn-Delivery count.
	Seq      int64 `bson:"seq"`
	Delivery int64 `bson:"delivery"`
	// Failed is a run the recorder failed on purpose.
	Failed bool `bson:"failed"`
	// Before is the sequences whose effect the key held when the run
	// began, in the order they were applied.
	Before []int64   `bson:"before"`
	At     time.Time `bson:"at"`
}
