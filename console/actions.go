package console

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jetfn/jetfn/deploy"
	"github.com/jetfn/jetfn/internal/textfit"
	"github.com/jetfn/jetfn/ops/dlq"
)

// action is one operator action: what its confirmation page says (read
// only) and what it does. New actions (pause, resume, rewind) are entries
// in actionTable; the gate, the confirmation and the audit line come with
// the table.
type action struct {
	Name string
	// Verb labels the confirm button.
	Verb string
	// confirm reads what the action would do, changing nothing.
	confirm func(ctx context.Context, s *Server, p url.Values) (confirmation, error)
	// run does it, and returns the page to go to and the audit line's
	// attributes beyond the action and the requester.
	run func(ctx context.Context, s *Server, p url.Values, by who) (next string, audit []any, err error)
}

// confirmation is what the confirmation page shows before the button.
type confirmation struct {
	Title   string
	Lines   []string
	Preview []string
	Diff    []diffLine
	// Refused says why the action cannot go ahead now; no button then.
	Refused string
}

func (s *Server) actionTable() map[string]action {
	table := map[string]action{}
	for _, a := range []action{
		{Name: "replay", Verb: "Replay", confirm: confirmReplay, run: runReplay},
		{Name: "replay-set", Verb: "Replay all of them", confirm: confirmReplaySet, run: runReplaySet},
		{Name: "rollback", Verb: "Roll back", confirm: confirmRollback, run: runRollback},
	} {
		table[a.Name] = a
	}
	return table
}

// ---- Replaying dead letters (ops/dlq does the work and keeps it safe).

func seqParam(p url.Values) (uint64, error) {
	seq, err := strconv.ParseUint(p.Get("seq"), 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("%w: dead letter %q", ErrNotFound, p.Get("seq"))
	}
	return seq, nil
}

func confirmReplay(ctx context.Context, s *Server, p url.Values) (confirmation, error) {
	seq, err := seqParam(p)
	if err != nil {
		return confirmation{}, err
	}
	store, err := dlq.Open(ctx, s.js, s.cfg.DeadLetter)
	if err != nil {
		return confirmation{}, err
	}
	c := confirmation{Title: fmt.Sprintf("Replay dead letter %d?", seq)}
	plan, err := store.Replay(ctx, seq, dlq.ReplayOptions{DryRun: true})
	if err != nil {
		c.Refused = err.Error()
		return c, nil
	}
	c.Lines = []string{
		fmt.Sprintf("Publishes its original payload and headers to %s (stream %s) as %s.", plan.Subject, plan.Stream, plan.MsgID),
		fmt.Sprintf("%s handles it again; the dead letter is deleted only once %s has stored the replay.", plan.Function, plan.Stream),
		"The replay is recorded, so the same dead letter cannot be replayed twice by accident.",
	}
	return c, nil
}

func runReplay(ctx context.Context, s *Server, p url.Values, by who) (string, []any, error) {
	seq, err := seqParam(p)
	if err != nil {
		return "", nil, err
	}
	j := s.jobs.start(fmt.Sprintf("Replay of dead letter %d", seq), by.User, 1)
	s.replayInBackground(j, []uint64{seq})
	return "/jobs/" + j.ID, []any{"seq", seq, "job", j.ID}, nil
}

// letterFilter is the dead letters page's filter: a function and a piece
// of the error text (case-insensitive).
type letterFilter struct {
	Function, Query string
}

func filterOf(p url.Values) letterFilter {
	return letterFilter{Function: strings.TrimSpace(p.Get("function")), Query: strings.TrimSpace(p.Get("q"))}
}

func (f letterFilter) keep(l dlq.Letter) bool {
	return f.Query == "" || strings.Contains(strings.ToLower(l.Error), strings.ToLower(f.Query))
}

// matching lists the dead letters the filter keeps.
func (s *Server) matching(ctx context.Context, f letterFilter) ([]dlq.Letter, error) {
	store, err := dlq.Open(ctx, s.js, s.cfg.DeadLetter)
	if err != nil {
		return nil, err
	}
	all, err := store.List(ctx, f.Function)
	if err != nil {
		return nil, err
	}
	var out []dlq.Letter
	for _, l := range all {
		if f.keep(l) {
			out = append(out, l)
		}
	}
	return out, nil
}

func confirmReplaySet(ctx context.Context, s *Server, p url.Values) (confirmation, error) {
	f := filterOf(p)
	letters, err := s.matching(ctx, f)
	if err != nil {
		return confirmation{}, err
	}
	c := confirmation{Title: fmt.Sprintf("Replay %d dead letters?", len(letters))}
	if len(letters) == 0 {
		c.Refused = "No dead letter matches the filter."
		return c, nil
	}
	c.Lines = []string{
		"Each is published again to its original subject under a new message ID, then deleted once its stream stored it.",
		"One that cannot be replayed (already replayed, its subject moved to another stream) is skipped and listed.",
	}
	for i, l := range letters {
		if i == 50 {
			c.Preview = append(c.Preview, fmt.Sprintf("… and %d more", len(letters)-50))
			break
		}
		c.Preview = append(c.Preview, fmt.Sprintf("%d  %s  %s  %s", l.Seq, l.Function, l.OriginalSubject, textfit.Truncate(l.Error, 80)))
	}
	return c, nil
}

func runReplaySet(ctx context.Context, s *Server, p url.Values, by who) (string, []any, error) {
	f := filterOf(p)
	letters, err := s.matching(ctx, f)
	if err != nil {
		return "", nil, err
	}
	if len(letters) == 0 {
		return "", nil, fmt.Errorf("%w: no dead letter matches", ErrNotFound)
	}
	seqs := make([]uint64, len(letters))
	for i, l := range letters {
		seqs[i] = l.Seq
	}
	j := s.jobs.start(fmt.Sprintf("Replay of %d dead letters", len(seqs)), by.User, len(seqs))
	s.replayInBackground(j, seqs)
	return "/jobs/" + j.ID, []any{"function", f.Function, "query", f.Query, "count", len(seqs), "job", j.ID}, nil
}

// replayInBackground replays seqs one by one, reporting each to the job.
// It runs on the server's context, not the request's, and Run waits for
// it; a stop ends it between two dead letters.
func (s *Server) replayInBackground(j *job, seqs []uint64) {
	ctx := s.runCtx
	s.work.Go(func() {
		defer j.finish()
		defer s.refresh()
		store, err := dlq.Open(ctx, s.js, s.cfg.DeadLetter)
		if err != nil {
			j.report(0, false, err.Error())
			return
		}
		for _, seq := range seqs {
			if ctx.Err() != nil {
				j.report(seq, false, "not replayed: the console is stopping")
				continue
			}
			r, err := store.Replay(ctx, seq, dlq.ReplayOptions{})
			text := replayText(r, err)
			j.report(seq, err == nil, text)
			s.cfg.Log.Info("console replay", "job", j.ID, "seq", seq, "function", r.Function, "result", text)
		}
	})
}

func replayText(r dlq.Replay, err error) string {
	var b strings.Builder
	dlq.WriteReplay(&b, r, err)
	return strings.TrimSpace(b.String())
}

// ---- Rolling back the deployment (deploy does the work).

func confirmRollback(ctx context.Context, s *Server, _ url.Values) (confirmation, error) {
	s.revisions.refreshIfStale(ctx, 0)
	revs, err := s.revisions.list()
	if err != nil {
		return confirmation{}, err
	}
	c := confirmation{Title: fmt.Sprintf("Roll back deployment %s?", s.cfg.Deployment)}
	if len(revs) < 2 {
		c.Refused = deploy.ErrNoPrevious.Error()
		return c, nil
	}
	cur, prev := revs[0], revs[1]
	c.Lines = []string{
		fmt.Sprintf("Stores the manifest of revision %d (%s) as a new revision after %d (%s).", prev.Number, prev.Digest, cur.Number, cur.Digest),
		"Every instance that follows the deployment applies it live; one that refuses it keeps running its current manifest.",
		"Nothing is deleted: revision " + strconv.FormatUint(cur.Number, 10) + " stays in the history.",
	}
	c.Diff = lineDiff(string(cur.Raw), string(prev.Raw))
	return c, nil
}

func runRollback(ctx context.Context, s *Server, _ url.Values, _ who) (string, []any, error) {
	from, to, err := deploy.Rollback(ctx, s.js, s.cfg.Deployment)
	if err != nil {
		return "", []any{"deployment", s.cfg.Deployment}, err
	}
	s.revisions.markStale()
	s.refresh()
	return "/deploys?rolled=" + strconv.FormatUint(to.Number, 10),
		[]any{"deployment", s.cfg.Deployment, "from_revision", from.Number, "to_revision", to.Number}, nil
}

// isNotFound reports errors that make a 404 rather than a 500.
func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, dlq.ErrNotFound)
}
