package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
)

// ReplayOptions change how Replay treats a dead letter.
type ReplayOptions struct {
	// DryRun plans the replay and changes nothing: no publish, no record,
	// no delete, not even the bucket.
	DryRun bool
	// Force replays a dead letter that was already replayed, under the
	// next attempt number.
	Force bool
	// Progress, if set, hears after each dead letter of a ReplayAll how
	// many of how many are done, and how many of those failed.
	Progress func(done, total, failed int)
}

// Replay is what a replay did, or would do with DryRun.
type Replay struct {
	Seq      uint64 `json:"seq"`
	Function string `json:"function"`
	Subject  string `json:"subject"`
	Stream   string `json:"stream"`
	MsgID    string `json:"msg_id"`
	Attempt  uint64 `json:"attempt"`
	// StoredSeq is the replay's sequence on the original stream.
	StoredSeq uint64 `json:"stored_seq,omitempty"`
	// Duplicate is a publish the stream had already stored: a resumed
	// replay whose first publish did land.
	Duplicate bool `json:"duplicate,omitempty"`
	DryRun    bool `json:"dry_run,omitempty"`
}

// Replay republishes the dead letter at seq to its original subject and
// deletes it once the original stream acknowledged the publish. See the
// package documentation for the replay record that refuses doing it twice.
func (s *Store) Replay(ctx context.Context, seq uint64, opts ReplayOptions) (Replay, error) {
	recs, err := openRecords(ctx, s.js, s.stream, !opts.DryRun)
	if err != nil {
		return Replay{}, err
	}
	key := recordKey(s.spec.Stream, seq)
	rec, err := recs.get(ctx, key)
	if err != nil {
		return Replay{}, err
	}
	l, err := s.Get(ctx, seq)
	if errors.Is(err, ErrNotFound) && rec != nil && rec.State == StateReplayed {
		return Replay{}, fmt.Errorf("dead letter %d: %w as %s to %s at %s, and deleted: nothing left to replay",
			seq, ErrAlreadyReplayed, rec.MsgID, rec.Subject, rec.At.Format(time.RFC3339))
	}
	if err != nil {
		return Replay{}, err
	}
	if err := l.check(); err != nil {
		return Replay{}, err
	}
	plan, err := planReplay(l, rec, opts.Force)
	if err != nil {
		return Replay{}, err
	}
	if err := s.checkStream(ctx, l); err != nil {
		return Replay{}, err
	}
	if opts.DryRun {
		plan.DryRun = true
		return plan, nil
	}
	return plan, s.replay(ctx, l, key, rec, &plan, recs)
}

// planReplay picks the attempt number: one past the replays the original's
// ID already counts, the same as an unconfirmed claim (a retry the stream
// deduplicates), or one past a finished replay when forced.
func planReplay(l Letter, rec *Record, force bool) (Replay, error) {
	base := l.identity()
	n := l.priorReplays() + 1
	if rec != nil {
		switch {
		case rec.State == StateClaimed:
			n = rec.Attempt
		case !force:
			return Replay{}, fmt.Errorf("dead letter %d: %w as %s to %s at %s (the dead letter remains because deleting it failed); --force replays it again as %s",
				l.Seq, ErrAlreadyReplayed, rec.MsgID, rec.Subject, rec.At.Format(time.RFC3339), jetfn.ReplayMsgID(base, max(n, rec.Attempt+1)))
		default:
			n = max(n, rec.Attempt+1)
		}
	}
	return Replay{Seq: l.Seq, Function: l.Function, Subject: l.OriginalSubject, Stream: l.OriginalStream,
		MsgID: jetfn.ReplayMsgID(base, n), Attempt: n}, nil
}

// replay claims, publishes, records and deletes, in that order: a failure
// at any step leaves a state that the next run resumes or refuses.
func (s *Store) replay(ctx context.Context, l Letter, key string, prev *Record, plan *Replay, recs records) error {
	rec := Record{DeadLetter: s.spec.Stream + ":" + fmt.Sprint(l.Seq), Subject: plan.Subject, MsgID: plan.MsgID,
		Attempt: plan.Attempt, State: StateClaimed, At: time.Now().UTC()}
	claimed, err := recs.put(ctx, key, prev, rec)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: l.OriginalSubject, Data: l.Data, Header: l.replayHeader(plan.MsgID)}
	ack, err := s.js.PublishMsg(ctx, msg)
	if err != nil {
		return fmt.Errorf("replaying dead letter %d to %s: %w (run the replay again: the same message ID keeps it from being stored twice)",
			l.Seq, l.OriginalSubject, err)
	}
	plan.StoredSeq, plan.Duplicate = ack.Sequence, ack.Duplicate
	rec.State, rec.StoredSeq, rec.At = StateReplayed, ack.Sequence, time.Now().UTC()
	if _, err := recs.put(ctx, key, claimed, rec); err != nil {
		return fmt.Errorf("recording the replay of dead letter %d (published as %s): %w", l.Seq, plan.MsgID, err)
	}
	if err := s.stream.DeleteMsg(ctx, l.Seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("deleting dead letter %d after its replay as %s: %w", l.Seq, plan.MsgID, err)
	}
	return nil
}

// Selection picks dead letters for a bulk replay: every field set must
// match.
type Selection struct {
	// Function keeps one function's dead letters.
	Function string
	// Since and Until keep the dead letters stored from Since and before
	// Until.
	Since, Until time.Time
	// ErrorContains keeps those whose error contains it, in any case.
	ErrorContains string
}

// keeps says whether l is selected (its function already is).
func (sel Selection) keeps(l Letter) bool {
	return (sel.Since.IsZero() || !l.Stored.Before(sel.Since)) &&
		(sel.Until.IsZero() || l.Stored.Before(sel.Until)) &&
		(sel.ErrorContains == "" || strings.Contains(strings.ToLower(l.Error), strings.ToLower(sel.ErrorContains)))
}

// Select lists the dead letters sel picks, in sequence order.
func (s *Store) Select(ctx context.Context, sel Selection) ([]Letter, error) {
	letters, err := s.List(ctx, sel.Function)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(letters, func(l Letter) bool { return !sel.keeps(l) }), nil
}

// ReplayAll replays every dead letter sel picks and reports each result,
// or why it was not replayed, to report, and after each how many of how
// many are done to opts.Progress. It returns how many were not replayed.
func (s *Store) ReplayAll(ctx context.Context, sel Selection, opts ReplayOptions, report func(Replay, error)) (failed int, err error) {
	letters, err := s.Select(ctx, sel)
	if err != nil {
		return 0, err
	}
	if len(letters) == 0 && opts.Progress != nil {
		opts.Progress(0, 0, 0)
	}
	for i, l := range letters {
		r, err := s.Replay(ctx, l.Seq, opts)
		if err != nil {
			r.Seq, r.Function = l.Seq, l.Function
			failed++
			if ctx.Err() != nil {
				return failed, ctx.Err()
			}
		}
		report(r, err)
		if opts.Progress != nil {
			opts.Progress(i+1, len(letters), failed)
		}
	}
	return failed, nil
}

// checkStream makes sure the original subject still goes to the original
// stream, so the replay lands where the function reads. It asks first
// instead of publishing with Nats-Expected-Stream, because the stream would
// store that header with the message: the runtime copies headers into a
// dead letter, and the dead-letter stream would then refuse it.
func (s *Store) checkStream(ctx context.Context, l Letter) error {
	name, err := s.js.StreamNameBySubject(ctx, l.OriginalSubject)
	if err != nil {
		return fmt.Errorf("looking up the stream of %s: %w", l.OriginalSubject, err)
	}
	if name != l.OriginalStream {
		return fmt.Errorf("dead letter %d: %s is now stored by stream %s, not %s: %w", l.Seq, l.OriginalSubject, name, l.OriginalStream, ErrStreamMoved)
	}
	return nil
}
