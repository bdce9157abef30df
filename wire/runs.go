package wire

import "time"

// The bounds of one function's run history in one process.
const (
	// RunHistory is how many runs each function remembers.
	RunHistory = 200
	// MaxRunPayload is how much of a run's payload is kept.
	MaxRunPayload = 4 << 10
	// MaxRunOutputs is how many of a run's outputs are kept; the rest are
	// only counted.
	MaxRunOutputs = 8
)

// Run is one handler run as its function remembers it: the wire form of
// the runs endpoint.
type Run struct {
	// ID is <stream sequence>.<delivery count>, unique within an instance.
	ID           string    `json:"id"`
	Started      time.Time `json:"started"`
	DurationMs   float64   `json:"duration_ms"`
	Outcome      string    `json:"outcome"` // ack, retry or dead_letter, as decided by the handler's result
	Abandoned    bool      `json:"abandoned,omitempty"`
	Error        string    `json:"error,omitempty"`
	Subject      string    `json:"subject"`
	Stream       string    `json:"stream"`
	StreamSeq    uint64    `json:"stream_seq"`
	NumDelivered uint64    `json:"num_delivered"`
	MsgID        string    `json:"msg_id,omitempty"`
	TraceID      string    `json:"trace_id,omitempty"`
	PayloadSize  int       `json:"payload_size"`
	// Payload is the first MaxRunPayload bytes, sent only for one run
	// asked by ID (RunsRequest.Run).
	Payload        []byte      `json:"payload,omitempty"`
	Outputs        []RunOutput `json:"outputs,omitempty"`
	OutputsDropped int         `json:"outputs_dropped,omitempty"`
}

// RunOutput is one output a run published and its stream acknowledged.
type RunOutput struct {
	Subject   string `json:"subject"`
	MsgID     string `json:"msg_id"`
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Size      int    `json:"size"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// RunsRequest is the body of a request to a runs endpoint; empty asks for
// every run, newest first, without payloads.
type RunsRequest struct {
	Limit int `json:"limit,omitempty"`
	// Run asks for one run by ID, with its payload; an instance that does
	// not have it answers with no runs.
	Run string `json:"run,omitempty"`
}

// RunsReply is a runs endpoint's answer.
type RunsReply struct {
	Function string `json:"function"`
	Instance string `json:"instance"`
	Capacity int    `json:"capacity"`
	// Recorded counts the runs since the function was bound here.
	Recorded uint64 `json:"recorded"`
	Runs     []Run  `json:"runs"`
	// Truncated is set when the oldest runs were left out to keep the
	// reply under the connection's maximum payload.
	Truncated bool `json:"truncated,omitempty"`
}
