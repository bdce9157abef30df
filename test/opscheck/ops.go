package opscheck

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn/deploy"
	"github.com/jetfn/jetfn/manifest"
)

// exec runs one nemesis operation and records it: invoke, then ok with
// what it did, or fail with why.
func (s *system) exec(ctx context.Context, op Op) {
	s.hist.Add(Event{Op: op.Index, Kind: string(op.Kind), Phase: Invoke, Detail: op.Describe()})
	detail, err := s.do(ctx, op)
	if err != nil {
		s.hist.Add(Event{Op: op.Index, Kind: string(op.Kind), Phase: Fail, Detail: err.Error()})
		return
	}
	s.hist.Add(Event{Op: op.Index, Kind: string(op.Kind), Phase: OK, Detail: detail})
}

func (s *system) do(ctx context.Context, op Op) (string, error) {
	switch op.Kind {
	case KKillJetfn:
		return s.killInstances(ctx, []*instance{s.instances[op.Target]}, op.For)
	case KKillAllJetfn:
		return s.killInstances(ctx, s.instances, op.For)
	case KPauseJetfn:
		return s.pauseInstance(ctx, s.instances[op.Target], op.For)
	case KKillNATS:
		return s.killNode(ctx, s.nats.nodes[op.Target%len(s.nats.nodes)], op.For)
	case KMongoOutage:
		s.mongo.Down()
		sleep(ctx, op.For)
		return "down for " + op.For.String(), s.mongo.Up()
	case KKillRemote:
		s.remote.Kill()
		sleep(ctx, op.For)
		return "down for " + op.For.String(), s.remote.Start(ctx, s.nc)
	case KPartitionRemote:
		return s.partitionRemote(ctx, op.For)
	case KDeploy:
		return s.deploy(ctx, *op.Rev)
	case KRollback:
		return s.rollback(ctx)
	case KDeleteConsumer:
		return s.deleteConsumer(ctx, op.Family)
	case KDeleteConsumerAllDown:
		return s.deleteConsumerAllDown(ctx, op.Family)
	case KDeleteStream:
		return s.deleteStream(ctx, op.Family)
	case KReplay:
		return s.replayOp(ctx, op)
	case KStrayStream:
		return s.strayStream(ctx, op.For)
	}
	return "", fmt.Errorf("unknown operation %s", op.Kind)
}

// sleep holds a fault for d: part of the schedule, not a wait for an
// effect.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (s *system) killInstances(ctx context.Context, ins []*instance, d time.Duration) (string, error) {
	for _, in := range ins {
		in.Kill()
	}
	down := time.Now()
	sleep(ctx, d)
	for _, in := range ins {
		if err := in.Start(ctx); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d killed, back after %s", len(ins), time.Since(down).Round(time.Millisecond)), nil
}

func (s *system) pauseInstance(ctx context.Context, in *instance, d time.Duration) (string, error) {
	if err := in.Pause(); err != nil {
		return "", err
	}
	sleep(ctx, d)
	return "paused for " + d.String(), in.Resume()
}

func (s *system) killNode(ctx context.Context, nd natsNode, d time.Duration) (string, error) {
	nd.Kill()
	sleep(ctx, d)
	if err := nd.Start(ctx); err != nil {
		return "", err
	}
	hctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return nd.name() + " down for " + d.String(), s.nats.healthy(hctx)
}

// partitionRemote holds every reply of the remote for d, then cuts its
// connections and waits until it serves again.
func (s *system) partitionRemote(ctx context.Context, d time.Duration) (string, error) {
	s.remote.Partition()
	sleep(ctx, d)
	s.remote.Heal()
	return "replies held for " + d.String(), s.remote.ready(ctx, s.nc)
}

func (s *system) rollback(ctx context.Context) (string, error) {
	out, err := s.jetfnCLI(ctx, "rollback", "--deployment", deployment)
	if err != nil {
		return "", err
	}
	m, err := s.current(ctx)
	if err != nil {
		return out, nil
	}
	s.live = append(s.live, liveRev{At: time.Now(), M: m})
	return out + "; now " + describeManifest(m), nil
}

// current is the deployment's live manifest.
func (s *system) current(ctx context.Context) (*manifest.Manifest, error) {
	rev, err := deploy.Load(ctx, s.js, deployment)
	if err != nil {
		return nil, err
	}
	return rev.Manifest()
}

// function is the family's function in m, or nil.
func function(m *manifest.Manifest, fam Family) *manifest.FunctionSpec {
	for i := range m.Functions {
		f := &m.Functions[i]
		if (fam == Remote) == f.IsRemote() {
			return f
		}
	}
	return nil
}

func describeManifest(m *manifest.Manifest) string {
	out := ""
	for _, f := range m.Functions {
		out += fmt.Sprintf("%s(durable %s, %v, ackWait %s) ", f.Name, f.Durable, f.FilterSubjects(), f.AckWait)
	}
	return out
}

// liveFunction is the live revision's function of fam.
func (s *system) liveFunction(ctx context.Context, fam Family) (*manifest.FunctionSpec, error) {
	m, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	f := function(m, fam)
	if f == nil {
		return nil, fmt.Errorf("the live revision has no %s function", fam)
	}
	return f, nil
}

// deleteConsumer deletes the consumers the live revision binds for fam, as
// `nats consumer rm` would: a plain function's durable; for a keyed one
// (the recording function), its router's consumer on the input and every
// partition's consumer on its keyed stream.
func (s *system) deleteConsumer(ctx context.Context, fam Family) (string, error) {
	f, err := s.liveFunction(ctx, fam)
	if err != nil {
		return "", err
	}
	if f.IsKeyed() {
		return s.deleteKeyedConsumers(ctx, f)
	}
	if err := s.js.DeleteConsumer(ctx, f.Stream, f.Durable); err != nil {
		return "", fmt.Errorf("deleting %s/%s: %w", f.Stream, f.Durable, err)
	}
	return "deleted " + f.Stream + "/" + f.Durable, nil
}

func (s *system) deleteKeyedConsumers(ctx context.Context, f *manifest.FunctionSpec) (string, error) {
	type consumer struct{ stream, name string }
	var all []consumer
	if f.IsRouted() {
		all = append(all, consumer{f.Stream, f.RouterDurable()})
	}
	for i := range f.Partitions {
		all = append(all, consumer{f.KeyedStreamName(), f.PartitionDurable(i)})
	}
	var deleted []string
	var errs []error
	for _, c := range all {
		if err := s.js.DeleteConsumer(ctx, c.stream, c.name); err != nil {
			errs = append(errs, fmt.Errorf("deleting %s/%s: %w", c.stream, c.name, err))
			continue
		}
		deleted = append(deleted, c.stream+"/"+c.name)
	}
	if len(deleted) == 0 {
		return "", errors.Join(errs...)
	}
	detail := fmt.Sprintf("deleted %d consumers of keyed function %s (%s, ...)", len(deleted), f.Name, deleted[0])
	if len(errs) > 0 {
		detail += fmt.Sprintf("; %d not: %v", len(errs), errors.Join(errs...))
	}
	return detail, nil
}

// deleteConsumerAllDown kills every instance, deletes the consumer (`nats
// consumer rm` while nothing runs), and starts them again.
func (s *system) deleteConsumerAllDown(ctx context.Context, fam Family) (string, error) {
	for _, in := range s.instances {
		in.Kill()
	}
	detail, derr := s.deleteConsumer(ctx, fam)
	for _, in := range s.instances {
		if err := in.Start(ctx); err != nil {
			return "", errors.Join(derr, err)
		}
	}
	return detail + " with every instance down", derr
}

// deleteStream deletes the family's input stream and waits until jetfn
// has recreated it.
func (s *system) deleteStream(ctx context.Context, fam Family) (string, error) {
	stream := greetingsStream
	if fam == Recording {
		stream = recordingStream
	}
	start := time.Now()
	err := s.js.DeleteStream(ctx, stream)
	s.deletions = append(s.deletions, deletion{Stream: stream, Start: start, End: time.Now()})
	if err != nil {
		return "", fmt.Errorf("deleting stream %s: %w", stream, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		if _, err := s.js.Stream(wctx, stream); err == nil {
			return fmt.Sprintf("deleted %s; recreated after %s", stream, time.Since(start).Round(time.Millisecond)), nil
		}
		select {
		case <-wctx.Done():
			return "deleted " + stream + "; not recreated within 15s", nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// strayStream is an administrator's stream that stores the remote
// function's request subject for d, then is deleted: JetStream answers
// each request with a PubAck, racing the remote's reply.
func (s *system) strayStream(ctx context.Context, d time.Duration) (string, error) {
	_, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: "STRAY", Subjects: []string{"greeter.handle"},
		Storage: jetstream.MemoryStorage, Replicas: s.replicas})
	if err != nil {
		return "", fmt.Errorf("creating stream STRAY: %w", err)
	}
	sleep(ctx, d)
	if err := s.js.DeleteStream(context.WithoutCancel(ctx), "STRAY"); err != nil {
		return "", fmt.Errorf("deleting stream STRAY: %w", err)
	}
	return "stream STRAY stored greeter.handle for " + d.String(), nil
}
