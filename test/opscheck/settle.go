package opscheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jetfn/jetfn/manifest"
)

// settleRounds bounds how often the settle phase replays dead letters of
// good inputs: a replay that is dead-lettered again is replayed once more.
const settleRounds = 3

// settle ends every fault, deploys the base revision (every function
// under its original name, every input subject covered), waits until
// its consumers have nothing pending, and replays the dead letters of
// good inputs, as an operator does after an incident. It returns how long
// that took; an error means it did not settle within bound.
func (s *system) settle(ctx context.Context, bound time.Duration) (time.Duration, error) {
	start := time.Now()
	s.settleStart = start
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	s.hist.Info("settle", fmt.Sprintf("faults over; healing, deploying the base revision, bound %s", bound))
	if err := s.heal(ctx); err != nil {
		return time.Since(start), fmt.Errorf("healing: %w", err)
	}
	if detail, err := s.deploy(ctx, baseRevision()); err != nil {
		return time.Since(start), fmt.Errorf("deploying the base revision: %w", err)
	} else {
		s.hist.Info("settle", "base revision: "+detail)
	}
	for range settleRounds {
		quiet, err := s.waitQuiet(ctx)
		if err != nil {
			return time.Since(start), err
		}
		n, err := s.replayGood(ctx)
		if err != nil {
			return time.Since(start), err
		}
		if n > 0 {
			continue
		}
		if quiet {
			return time.Since(start), nil
		}
		return time.Since(start), s.stalled(ctx)
	}
	if quiet, err := s.waitQuiet(ctx); err != nil || quiet {
		return time.Since(start), err
	}
	return time.Since(start), s.stalled(ctx)
}

func (s *system) stalled(ctx context.Context) error {
	state, _ := s.consumersQuiet(ctx)
	return fmt.Errorf("not settled: stalled for %s with %s", stallAfter, state)
}

// heal ends whatever fault is left: every server, the remote and every
// instance runs and nothing is paused.
func (s *system) heal(ctx context.Context) error {
	for _, nd := range s.nats.nodes {
		if !nd.Up() {
			if err := nd.Start(ctx); err != nil {
				return err
			}
		}
		_ = nd.Resume()
	}
	if err := s.nats.healthy(ctx); err != nil {
		return err
	}
	if err := s.mongo.Up(); err != nil {
		return err
	}
	s.remote.Heal()
	if !s.remote.Up() {
		if err := s.remote.Start(ctx, s.nc); err != nil {
			return err
		}
	}
	for _, in := range s.instances {
		_ = in.Resume()
		if err := in.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stallAfter is how long the consumers may show the same state, with
// something pending, before the settle phase calls them stalled: longer
// than a whole retry cycle of one message (maxDeliver × (timeout +
// backoff)), after which it is acked or dead-lettered.
const stallAfter = 10 * time.Second

// waitQuiet waits until the base revision's consumers (consumersQuiet)
// exist with the base filters and have nothing pending or unacknowledged
// in looks a second apart, and the dead-letter observer has read
// everything (true); or until their state has not changed for stallAfter
// with something still pending (false). The error is the settle bound
// passing first.
func (s *system) waitQuiet(ctx context.Context) (bool, error) {
	var quietSince, sameSince time.Time
	var last string
	for {
		state, quiet := s.consumersQuiet(ctx)
		if state != last {
			last, sameSince = state, time.Now()
		}
		switch {
		case !quiet && time.Since(sameSince) >= stallAfter:
			s.hist.Info("settle", "stalled: "+state)
			return false, nil
		case !quiet:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = time.Now()
		case time.Since(quietSince) >= time.Second && s.dl.poll(ctx):
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("not settled within the bound: %s", last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// consumersQuiet looks at the base revision's consumers once: the remote
// function's durable, and for the keyed recording function its router's
// consumer and its partitions' consumers.
func (s *system) consumersQuiet(ctx context.Context) (string, bool) {
	base := baseRevision()
	remote, rok := s.consumerState(ctx, greetingsStream, base.Remote)
	router := base.Recording
	router.Durable = (&manifest.FunctionSpec{Durable: base.Recording.durable()}).RouterDurable()
	routed, uok := s.consumerState(ctx, recordingStream, router)
	parts, pok := s.partitionsState(ctx, base.Recording)
	return remote + "; " + routed + "; " + parts + "; ", rok && uok && pok
}

// partitionsState adds up the keyed function's partition consumers: quiet
// when every one exists with nothing pending or unacknowledged.
func (s *system) partitionsState(ctx context.Context, f fnRev) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	spec := &manifest.FunctionSpec{Name: f.Name, Durable: f.durable()}
	name := spec.KeyedStreamName()
	ks, err := s.js.Stream(ctx, name)
	if err != nil {
		return fmt.Sprintf("%s: %v", name, err), false
	}
	found := 0
	var pending, ackPending, redelivered uint64
	for i := range recordingPartitions {
		c, err := ks.Consumer(ctx, spec.PartitionDurable(i))
		if err != nil {
			continue
		}
		ci := c.CachedInfo()
		found++
		pending, ackPending, redelivered = pending+ci.NumPending, ackPending+uint64(ci.NumAckPending), redelivered+uint64(ci.NumRedelivered)
	}
	st := fmt.Sprintf("%s: %d messages, %d of %d partition consumers, pending %d, ack pending %d, redelivered %d", name,
		ks.CachedInfo().State.Msgs, found, recordingPartitions, pending, ackPending, redelivered)
	return st, found == recordingPartitions && pending == 0 && ackPending == 0
}

func (s *system) consumerState(ctx context.Context, stream string, f fnRev) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := s.js.Consumer(ctx, stream, f.durable())
	if err != nil {
		return fmt.Sprintf("%s/%s: %v", stream, f.durable(), err), false
	}
	ci := c.CachedInfo()
	filter := ci.Config.FilterSubjects
	if ci.Config.FilterSubject != "" {
		filter = []string{ci.Config.FilterSubject}
	}
	st := fmt.Sprintf("%s/%s: filter %v, pending %d, ack pending %d, redelivered %d, ack floor %d", stream, f.durable(), filter,
		ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.AckFloor.Stream)
	return st, slices.Equal(filter, f.Filter) && ci.NumPending == 0 && ci.NumAckPending == 0
}

// replayGood replays, one by one, every dead letter of a good input not
// replayed yet, and returns how many it replayed.
func (s *system) replayGood(ctx context.Context) (int, error) {
	if err := s.dl.sync(ctx); err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, d := range s.liveDeadLetters() {
		if in := s.book.input(d.Token); in == nil || in.Poison != Good {
			continue
		}
		out, err := s.jetfnCLI(ctx, "dlq", "replay", "--manifest", s.baseManifest(), strconv.FormatUint(d.Seq, 10))
		n += s.recordReplays(ctx, -1, out)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		s.hist.Info("settle", "replays refused: "+errors.Join(errs...).Error())
	}
	return n, nil
}
