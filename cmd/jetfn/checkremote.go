package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/internal/discovery"
	"github.com/jetfn/jetfn/manifest"
)

// streamLookupTimeout bounds asking the server which streams store a
// remote subject; a user without the right to ask gets no answer at all.
const streamLookupTimeout = 5 * time.Second

// checkRemotes looks up every remote function's endpoint by micro
// discovery on server and prints, for each, the services that serve it,
// or a problem at the function's remote.subject line when none answers:
// its messages would be retried and dead-lettered, and /readyz would fail.
// It also refuses a remote subject that a stream outside the manifest
// stores (the manifest's own streams are checked without a server).
func checkRemotes(ctx context.Context, m *manifest.Manifest, server string, cfg Config, window time.Duration, out, errOut io.Writer) error {
	if len(m.RemoteSubjects()) == 0 {
		return nil
	}
	return withJetStreamAt(server, cfg.NATS, cfg.newLogger(errOut), func(js jetstream.JetStream) error {
		infos, err := discovery.Infos(ctx, js.Conn(), window)
		if err != nil {
			return fmt.Errorf("asking %s for its micro services: %w", redactURLs(server), err)
		}
		problems := 0
		for i, f := range m.Functions {
			if !f.IsRemote() {
				continue
			}
			problems += checkStoredBy(ctx, js, m, i, out)
			serving := discovery.Serving(infos, f.Remote.Subject)
			if len(serving) == 0 {
				problems++
				fmt.Fprintln(out, m.FunctionProblem(i, "remote.subject", fmt.Errorf(
					"no micro service on %s serves %s (%d services answered $SRV.INFO within %s): its messages would be "+
						"retried and dead-lettered, and /readyz would fail", redactURLs(server), f.Remote.Subject, len(infos), window)))
				continue
			}
			fmt.Fprintf(out, "%s: remote %s is served by %s\n", f.Name, f.Remote.Subject, describeServices(serving))
		}
		if problems > 0 {
			fmt.Fprintf(out, "%s: %s\n", m.File(), plural(problems, "problem"))
			return errCheckFailed
		}
		return nil
	})
}

// checkStoredBy prints a problem at the remote.subject line of the i-th
// function for each stream outside the manifest that stores its remote
// subject, and returns how many it printed. JetStream would store every
// request and answer it with a PubAck: jetfn skips that and waits for the
// remote's reply, but the stream keeps a copy of every request. A lookup
// the server does not answer is a warning, so a user without the right to
// list streams can still check.
func checkStoredBy(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest, i int, out io.Writer) int {
	subject := m.Functions[i].Remote.Subject
	streams, err := storingStreams(ctx, js, m, subject)
	if err != nil {
		fmt.Fprintf(out, "warning: %s: could not ask which streams store remote subject %s: %v\n", m.Functions[i].Name, subject, err)
		return 0
	}
	for _, s := range streams {
		fmt.Fprintln(out, m.FunctionProblem(i, "remote.subject", fmt.Errorf(
			"stream %s (not in the manifest) stores %s: JetStream would store every request and answer it with a "+
				"PubAck; jetfn waits past it for the remote's reply, but the stream keeps a copy of every request. "+
				"Remove the subject from stream %s", s, subject, s)))
	}
	return len(streams)
}

// storingStreams lists the streams on the server, other than the
// manifest's own (jetfn sets their subjects to the manifest's), whose
// subjects collide with subject.
func storingStreams(ctx context.Context, js jetstream.JetStream, m *manifest.Manifest, subject string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, streamLookupTimeout)
	defer cancel()
	names := js.StreamNames(ctx, jetstream.WithStreamListSubject(subject))
	var out []string
	for name := range names.Name() {
		if _, declared := m.Stream(name); !declared {
			out = append(out, name)
		}
	}
	return out, names.Err()
}

// describeServices is "greeter 1.0.0 (2 instances)", per name and version.
func describeServices(infos []micro.Info) string {
	counts := map[string]int{}
	var order []string
	for _, info := range infos {
		k := info.Name + " " + info.Version
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%s (%s)", k, plural(counts[k], "instance"))
	}
	return strings.Join(parts, ", ")
}
