package crash

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/test/testkit"
)

// RemotePoint is a kill while jetfn waits for a remote function's reply.
// Each run holds the remote's reply in its proxy, publishes one request,
// waits until the remote has stored its document, SIGKILLs one side,
// restarts it and counts documents and outputs: one of each, whoever died.
type RemotePoint struct {
	Name string
	// killJetfn kills jetfn instead of the remote.
	killJetfn bool
}

// RemotePoints are the remote function's kill points: the remote killed
// after its upsert and before its reply reaches NATS (jetfn gives up at its
// 2s timeout and retries after the 1s backoff, to the restarted remote),
// and jetfn killed while the remote works on its request (the restarted
// jetfn gets the redelivery after the 2s ackWait; the remote, whose
// connection was cut with its held reply, is often still reconnecting then,
// so that delivery finds no responders and the next, 1s later, is handled).
func RemotePoints() []RemotePoint {
	return []RemotePoint{
		{Name: "remote-killed-mid-request"},
		{Name: "jetfn-killed-while-remote-works", killJetfn: true},
	}
}

// remoteNote says what the remote rows' columns count.
const remoteNote = "summaries are the remote's documents, notifications its greet.done outputs"

// RunRemotePoint runs p runs times and returns its row.
func (h *Harness) RunRemotePoint(ctx context.Context, p RemotePoint, runs int) Row {
	row := Row{Point: p.Name, WantSummaries: 1, WantNotifications: 1, Note: remoteNote}
	return h.repeat(ctx, row, runs, func() Result { return h.remoteOnce(ctx, p) })
}

func (h *Harness) remoteOnce(ctx context.Context, p RemotePoint) Result {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := h.remoteRun(ctx, p)
	err = h.stopChildAfter(err)
	if stopErr := h.stopRemote(); err == nil {
		err = stopErr
	}
	res.Err = err
	return res
}

func (h *Harness) remoteRun(ctx context.Context, p RemotePoint) (Result, error) {
	if err := h.prepareRemote(p.Name); err != nil {
		return Result{}, err
	}
	if err := h.startRemote(ctx); err != nil {
		return Result{}, err
	}
	if _, err := h.startChild(ctx); err != nil {
		return Result{}, err
	}
	from, err := nextSeq(ctx, h.stack.js, remoteStream)
	if err != nil {
		return Result{}, err
	}
	key := fmt.Sprintf("greet-%03d", h.runs)
	h.remoteProxy.Freeze() // the remote gets the request; its reply stays here
	if _, err := h.stack.js.Publish(ctx, remoteInput, []byte(`{"name":"Ana"}`), jetstream.WithMsgID(key)); err != nil {
		return Result{}, fmt.Errorf("publishing %s: %w", remoteInput, err)
	}
	restart, err := h.killRemoteSide(ctx, p, from)
	if err != nil {
		return Result{}, err
	}
	return h.settleRemote(ctx, key, from, restart)
}

// killRemoteSide waits until the remote has stored its document, kills the
// point's side, checks that no output was published yet, and restarts it.
// Killing jetfn also cuts the remote's held connection, and the remote
// reconnects on its own while jetfn restarts; its reply, for a requester
// that is gone, is dropped with the connection.
func (h *Harness) killRemoteSide(ctx context.Context, p RemotePoint, from uint64) (time.Time, error) {
	err := testkit.Poll(ctx, time.Millisecond, "the remote's document", func(ctx context.Context) bool {
		n, err := h.remoteDocuments(ctx)
		return err == nil && n > 0
	})
	if err != nil {
		return time.Time{}, err
	}
	if p.killJetfn {
		h.killChild()
	} else {
		h.killRemote()
	}
	docs, outs, err := h.remoteCount(ctx, from)
	if err != nil {
		return time.Time{}, err
	}
	if docs != 1 || len(outs) != 0 {
		return time.Time{}, fmt.Errorf("kill missed its point: %d documents and %d outputs stored at the kill, want 1 and 0", docs, len(outs))
	}
	if !p.killJetfn {
		return time.Now(), h.startRemote(ctx)
	}
	h.remoteProxy.Cut()
	return h.startChild(ctx)
}

// settleRemote waits until the function's consumer has acked the request
// after the restart and its output is stored, then counts. An output
// without jetfn's scoped message ID fails the run.
func (h *Harness) settleRemote(ctx context.Context, key string, from uint64, restart time.Time) (Result, error) {
	var outs []output
	err := testkit.Poll(ctx, 20*time.Millisecond, "request "+key+" to settle", func(ctx context.Context) bool {
		info, err := durableInfo(ctx, h.stack.js, remoteStream, remoteFunction)
		if err != nil || !settled(info) || info.AckFloor.Last == nil || info.AckFloor.Last.Before(restart) {
			return false
		}
		outs, err = scanOutputs(ctx, h.stack.js, from)
		return err == nil && len(outs) > 0
	})
	docs, _ := h.remoteDocuments(context.WithoutCancel(ctx))
	res := Result{Summaries: docs, Notifications: len(outs)}
	if err != nil {
		return res, err
	}
	res.Recovery = outs[0].stored.Sub(restart)
	want, _ := jetfn.OutputMsgID(remoteFunction, remoteOutput, key)
	for _, o := range outs {
		if o.msgID != want {
			return res, fmt.Errorf("output #%d has message ID %q, want %q", o.seq, o.msgID, want)
		}
	}
	return res, nil
}

// remoteCount reads the documents and the outputs stored now.
func (h *Harness) remoteCount(ctx context.Context, from uint64) (int, []output, error) {
	docs, err := h.remoteDocuments(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("counting documents: %w", err)
	}
	var outs []output
	err = testkit.Retry(ctx, readWithin, "counting outputs", func(ctx context.Context) error {
		var err error
		outs, err = scanOutputs(ctx, h.stack.js, from)
		return err
	})
	if err != nil {
		return 0, nil, fmt.Errorf("counting outputs: %w", err)
	}
	return docs, outs, nil
}

// remoteDocuments counts the remote's documents in the run's database:
// all of them, since each run sends one request, so a document stored under
// any other _id than the request's key would be a duplicate too.
func (h *Harness) remoteDocuments(ctx context.Context) (int, error) {
	n, err := h.stack.DB(h.db).Collection(remoteCollection).CountDocuments(ctx, bson.D{})
	return int(n), err
}

// output is one greet.done stored in the stream.
type output struct {
	seq    uint64
	msgID  string
	stored time.Time
}

// scanOutputs reads every greet.done stored from stream sequence from on.
func scanOutputs(ctx context.Context, js jetstream.JetStream, from uint64) ([]output, error) {
	msgs, err := storedMsgs(ctx, js, remoteStream, remoteOutput, from)
	if err != nil {
		return nil, err
	}
	var outs []output
	for _, m := range msgs {
		outs = append(outs, output{seq: m.Sequence, msgID: m.Header.Get(jetstream.MsgIDHeader), stored: m.Time})
	}
	return outs, nil
}
