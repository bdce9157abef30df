package runtime

// Delayed outputs (Publisher.PublishAt, manifest/delayed.go): the output
// waits in its stream as the server's one-shot message schedule, beside a
// receipt that carries its message ID; the two go in one atomic batch, so
// there is never one without the other. A retried handler's batch holds
// the same receipt ID, and the server refuses a batch that holds a
// duplicate whole: the output is scheduled once, whether the first
// schedule still waits, was published long ago, or the server restarted
// in between (it rebuilds its IDs from the stored receipts).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/manifest"
)

// The headers of an atomic batch (nats-server 2.12) and of the output's
// identity, which the published output keeps (the server strips its
// Nats-Msg-Id when it publishes a schedule).
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
	// OutputIDHeader names a delayed output's message ID on the output
	// itself.
	OutputIDHeader = "Jetfn-Output-Id"
)

// The server's answers to an atomic batch that matter here: one that
// holds a message ID it remembers (here, a receipt: the output is already
// scheduled), and those a new batch may not get again: a previous
// attempt's commit still being applied, a batch whose first message did
// not reach the leader (a leadership change), and the stream's limit of
// batches in flight (a lost commit holds its place until the batch times
// out). And those no batch of the same messages ever gets past: a message,
// its headers or the batch larger than the stream takes.
const (
	errCodeBatchDuplicate       = 10201
	errCodeBatchIncomplete      = 10176
	errCodeBatchTooManyInFlight = 10210
	errCodeMsgTooLarge          = 10054
	errCodeHeaderTooLarge       = 10097
	errCodeBatchTooLarge        = 10199
)

// errBatchRetry is a batch refusal another batch may not meet.
var errBatchRetry = errors.New("the stream asks for the batch again")

// errTooLargeToStore is a batch refusal every batch of the same messages
// meets.
var errTooLargeToStore = errors.New("too large for the stream")

// PublishAt schedules one delayed output: see the file comment.
func (p outputPublisher) PublishAt(ctx context.Context, subject string, data []byte, key string, at time.Time) error {
	if err := p.checkDelayed(subject, key); err != nil {
		return err
	}
	msgID, err := jetfn.OutputMsgID(p.scopeName(), subject, key)
	if err != nil {
		return err
	}
	schedule, receipt := delayedBatch(subject, data, msgID, at)
	header, span := startSend(ctx, p.tracer, subject, msgID, len(data))
	for k, v := range header {
		schedule.Header[k] = v
	}
	ack, err := publishBatchAcked(ctx, p.js.Conn(), schedule, receipt)
	endSend(span, ack, err)
	if err != nil {
		return err
	}
	noteOutput(ctx, subject, msgID, len(data), ack) // console: recent runs
	if ack.Duplicate {
		p.stats.duplicateOutputs.Add(1)
	}
	return nil
}

// checkDelayed refuses a delayed publish the manifest does not allow.
func (p outputPublisher) checkDelayed(subject, key string) error {
	if !manifest.CoveredByAny(subject, p.outputs) {
		return jetfn.Permanent(fmt.Errorf("%w: function %s publishes only to %v (manifest outputs), not %s",
			jetfn.ErrUndeclaredOutput, p.function, p.outputs, subject))
	}
	if !manifest.CoveredByAny(subject, p.delayed) {
		return jetfn.Permanent(fmt.Errorf("%w: output %s of function %s: add delayed: true to it in the manifest",
			jetfn.ErrUndelayedOutput, subject, p.function))
	}
	if key == jetfn.NoDedup {
		return jetfn.Permanent(fmt.Errorf("%w: a delayed output needs a key (not NoDedup), or a retry would schedule it again",
			jetfn.ErrUndelayedOutput))
	}
	return nil
}

// delayedBatch is a delayed output's two messages: the server's schedule
// on a subject of its own, and the receipt beside it.
func delayedBatch(subject string, data []byte, msgID string, at time.Time) (schedule, receipt *nats.Msg) {
	h := fnv.New64a()
	h.Write([]byte(msgID))
	waiting := subject + manifest.DelaySubjectInfix + strconv.FormatUint(h.Sum64(), 36)
	schedule = nats.NewMsg(waiting)
	schedule.Header.Set(scheduleHeader, "@at "+at.UTC().Format(time.RFC3339Nano))
	schedule.Header.Set(scheduleTargetHeader, subject)
	schedule.Header.Set(OutputIDHeader, msgID)
	schedule.Data = data
	receipt = nats.NewMsg(waiting + ".sent")
	receipt.Header.Set(nats.MsgIdHdr, msgID)
	receipt.Data, _ = json.Marshal(map[string]string{"subject": subject, "at": at.UTC().Format(time.RFC3339Nano)})
	return schedule, receipt
}

// publishBatchAcked publishes msgs as one atomic batch and waits for the
// stream's acknowledgement of its commit; a batch the stream refused for
// a message ID it remembers is acknowledged as a duplicate. A batch that
// got no answer, or one the stream asks for again (errBatchRetry), is sent
// again under a new batch ID, as publishAcked retries a publish: the
// receipt's ID makes that safe.
func publishBatchAcked(ctx context.Context, nc *nats.Conn, msgs ...*nats.Msg) (*jetstream.PubAck, error) {
	return retryPublishing(ctx, func(err error) bool { return errors.Is(err, errBatchRetry) || retryablePublish(err, true) },
		func() (*jetstream.PubAck, error) { return publishBatchOnce(ctx, nc, msgs) })
}

// batchAck is the stream's answer to a message of an atomic batch.
type batchAck struct {
	Stream   string `json:"stream"`
	Sequence uint64 `json:"seq"`
	Error    *struct {
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// publishBatchOnce sends one attempt: every message but the last as a
// request too, so a refusal of the first (atomic batches turned off, say)
// is the error, not the "incomplete batch" the commit would get.
func publishBatchOnce(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg) (*jetstream.PubAck, error) {
	id := nuid.Next()
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	for i, m := range msgs {
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i == len(msgs)-1 {
			m.Header.Set(batchCommitHeader, "1")
		}
		ack, err := requestBatchMsg(ctx, nc, m)
		if err != nil || i == len(msgs)-1 {
			return ack, err
		}
	}
	return nil, errors.New("an empty batch")
}

// requestBatchMsg sends one message of a batch and reads the answer: an
// empty one for a message before the commit, the acknowledgement of the
// whole batch for the commit.
func requestBatchMsg(ctx context.Context, nc *nats.Conn, m *nats.Msg) (*jetstream.PubAck, error) {
	reply, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("publishing a delayed output to %s: %w", m.Subject, err)
	}
	if len(reply.Data) == 0 {
		return nil, nil
	}
	var ack batchAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return nil, fmt.Errorf("reading the acknowledgement of a delayed output: %w", err)
	}
	if ack.Error == nil {
		return &jetstream.PubAck{Stream: ack.Stream, Sequence: ack.Sequence}, nil
	}
	switch ack.Error.ErrCode {
	case errCodeBatchDuplicate:
		return &jetstream.PubAck{Stream: ack.Stream, Duplicate: true}, nil
	case int(errCodeMsgIDInProcess), errCodeBatchIncomplete, errCodeBatchTooManyInFlight:
		return nil, fmt.Errorf("%w: %s", errBatchRetry, ack.Error.Description)
	case errCodeMsgTooLarge, errCodeHeaderTooLarge, errCodeBatchTooLarge:
		return nil, fmt.Errorf("%w (%w): publishing to %s: %s", ErrServerRefused, errTooLargeToStore, m.Subject, ack.Error.Description)
	}
	return nil, fmt.Errorf("%w: publishing a delayed output to %s: %s", ErrServerRefused, m.Subject, ack.Error.Description)
}
