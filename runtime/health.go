package runtime

import (
	"errors"
	"fmt"
	"slices"
)

// ConsumerProblems is nil while every bound function has its durable
// consumer; otherwise it names each function that cannot pull and why. A
// deleted consumer makes a function look idle, so /readyz reports it.
func (r *Runtime) ConsumerProblems() error {
	var errs []error
	for _, a := range r.bound() {
		if err := a.b.consumerErr(); err != nil {
			errs = append(errs, fmt.Errorf("function %s: %w", a.b.spec.Name, err))
		}
	}
	return errors.Join(errs...)
}

// WorkersStuck is nil unless, for some function, handlers abandoned after
// their timeout still run in as many goroutines as it has workers: the
// runtime replaced those workers, but a process holding that many stuck
// handlers deserves a restart, so /readyz reports it.
func (r *Runtime) WorkersStuck() error {
	var errs []error
	for _, a := range r.bound() {
		stuck, workers := a.b.stats.abandonedRunning.Load(), a.b.spec.Concurrency
		if stuck >= int64(workers) {
			errs = append(errs, fmt.Errorf("function %s: %d abandoned handlers still running, concurrency %d",
				a.b.spec.Name, stuck, workers))
		}
	}
	return errors.Join(errs...)
}

// RemotesUnanswered is nil unless some remote function's endpoint has no
// responders: its last request found none, or the last discovery probe
// (every DefaultRemoteProbe) found no instance. Its messages are retried
// meanwhile and dead-lettered on their last delivery, so /readyz reports it.
func (r *Runtime) RemotesUnanswered() error {
	var errs []error
	for _, a := range r.bound() {
		if a.b.remote == nil {
			continue
		}
		if err := a.b.remote.problem(); err != nil {
			errs = append(errs, fmt.Errorf("function %s: %w", a.b.spec.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (r *Runtime) bound() []*active {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.active)
}
