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
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
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

// errCodeBatchDuplicate is the server's refusal of an atomic batch that
// holds a message ID it remembers: here, a receipt, so the output is
// already scheduled.
const errCodeBatchDuplicate = 10201

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
	duplicate, err := publishBatchAcked(ctx, p.js.Conn(), schedule, receipt)
	endSend(span, nil, err)
	if err != nil || !duplicate {
		return err
	}
	p.stats.duplicateOutputs.Add(1)
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
// stream's acknowledgement of its commit; duplicate says the stream
// refused it for a message ID it remembers. A batch that got no answer is
// sent again under a new batch ID, as publishAcked retries a publish: the
// receipt's ID makes that safe.
func publishBatchAcked(ctx context.Context, nc *nats.Conn, msgs ...*nats.Msg) (duplicate bool, err error) {
	giveUp := time.Now().Add(publishRetryFor)
	for {
		duplicate, err = publishBatchOnce(ctx, nc, msgs)
		if err == nil || !retryablePublish(err, true) || ctx.Err() != nil || time.Now().After(giveUp) {
			return duplicate, err
		}
		pause(ctx, publishRetryWait)
	}
}

func publishBatchOnce(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg) (bool, error) {
	id := nuid.Next()
	for i, m := range msgs {
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				return false, err
			}
		}
	}
	commit := msgs[len(msgs)-1]
	commit.Header.Set(batchCommitHeader, "1")
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	reply, err := nc.RequestMsgWithContext(ctx, commit)
	if err != nil {
		return false, fmt.Errorf("publishing a delayed output to %s: %w", msgs[0].Subject, err)
	}
	var ack struct {
		Error *struct {
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return false, fmt.Errorf("reading the acknowledgement of a delayed output: %w", err)
	}
	switch {
	case ack.Error == nil:
		return false, nil
	case ack.Error.ErrCode == errCodeBatchDuplicate:
		return true, nil
	}
	return false, fmt.Errorf("%w: publishing a delayed output to %s: %s", ErrServerRefused, msgs[0].Subject,
		ack.Error.Description)
}
