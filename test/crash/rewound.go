package crash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/jetfn/jetfn/test/testkit"
)

// The rewound row proves issue 32's rewind on the real binary: the order
// recorder runs as a plain function, handles every message once, and then
// the operator moves its consumer back to the first message with
// `jetfn rewind --to 1 --yes`; while it handles them all again, jetfn is
// SIGKILLed at random moments and restarted. Every message must then have
// run again after the rewind (the replay happened), and still have taken
// effect once, with one output: the replay's outputs fall inside the
// output stream's duplicate window.

const rewoundName = "rewound-replay-kill"

// Rewound is the rewound row: Keys × Messages messages, Kills SIGKILLs
// during the replay.
type Rewound struct {
	Keys, Messages, Kills int
}

// RunRewound runs the rewound row: one "run" per message.
func (h *Harness) RunRewound(ctx context.Context, rw Rewound) Row {
	row := Row{Point: fmt.Sprintf("%s (%d keys x %d messages, rewound to 1, %d kills in the replay)", rewoundName,
		rw.Keys, rw.Messages, rw.Kills), WantSummaries: 1, WantNotifications: 1}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ev := &orderedEvidence{}
	err := h.rewoundRun(ctx, rw, ev)
	err = h.stopOrdered(err)
	e, rerr := h.orderedEffects(context.WithoutCancel(ctx))
	if err == nil {
		err = rerr
	}
	v := checkOrder(orderedFunction, ev.inputs, e)
	replayed := 0
	runs := map[int64]int{}
	for _, r := range e.Runs {
		runs[r.Seq]++
	}
	for _, in := range ev.inputs {
		if runs[in.Seq] >= 2 {
			replayed++
		}
	}
	if replayed != len(ev.inputs) && err == nil {
		err = fmt.Errorf("%d of %d messages ran again after the rewind", replayed, len(ev.inputs))
	}
	row.addAll(v.Results, err)
	row.Note = fmt.Sprintf("summaries are the recorder's effects, notifications its outputs; %d messages ran again after the rewind; "+
		"%d SIGKILLs in the replay; recorder runs %d", replayed, ev.kills, len(e.Runs))
	h.opts.Log.Info("rewound", "point", row.Point, "messages", row.Runs, "err", err)
	return row
}

// rewoundRun handles every message once, rewinds the function to the
// first, and kills jetfn at random moments of the replay.
func (h *Harness) rewoundRun(ctx context.Context, rw Rewound, ev *orderedEvidence) error {
	if err := h.startRecorderRun(ctx, rewoundName, fmt.Sprintf(orderedManifestTemplate, "", orderedMaxDeliver, orderedConcurrency),
		ordersStream, recordedStream); err != nil {
		return err
	}
	var err error
	if ev.inputs, err = h.publishOrders(ctx, Ordered{Keys: rw.Keys, Messages: rw.Messages}); err != nil {
		return err
	}
	total := len(ev.inputs)
	if err := h.settleOrdered(ctx, total, false); err != nil {
		return err
	}
	if err := h.rewindToFirst(ctx); err != nil {
		return err
	}
	for _, at := range randomMoments(total, rw.Kills) {
		if err := h.awaitRuns(ctx, int64(total+at)); err != nil {
			return err
		}
		h.killChild()
		ev.kills++
		if _, err := h.startChild(ctx); err != nil {
			return err
		}
	}
	if err := h.awaitRuns(ctx, int64(2*total)); err != nil {
		return err
	}
	return h.settleOrdered(ctx, total, false)
}

// rewindToFirst runs `jetfn rewind record-order --to 1 --yes` as an
// operator would, straight to nats-server.
func (h *Harness) rewindToFirst(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, h.bin, "rewind", orderedFunction, "--to", "1", "--yes", "--manifest", h.manPath)
	cmd.Env = append(os.Environ(), "NATS_URL="+h.stack.NATSURL())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("jetfn rewind: %w: %s", err, out)
	}
	if !strings.Contains(string(out), "delivers stream sequence 1 next") {
		return fmt.Errorf("jetfn rewind did not say it moved the consumer: %s", out)
	}
	return nil
}

// awaitRuns waits until the recorder has stored at least n runs.
func (h *Harness) awaitRuns(ctx context.Context, n int64) error {
	runs := h.stack.DB(h.db).Collection(recorderRuns)
	var last int64
	err := testkit.Poll(ctx, 5*time.Millisecond, fmt.Sprintf("%d recorder runs", n), func(ctx context.Context) bool {
		got, err := runs.CountDocuments(ctx, bson.D{})
		last = got
		return err == nil && got >= n
	})
	if err != nil {
		return errors.Join(err, fmt.Errorf("%d runs stored", last))
	}
	return nil
}
