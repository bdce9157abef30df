package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/internal/discovery"
	"github.com/jetfn/jetfn/manifest"
)

// checkRemotes looks up every remote function's endpoint by micro
// discovery on server and prints, for each, the services that serve it,
// or a problem at the function's remote.subject line when none answers:
// its messages would be retried and dead-lettered, and /readyz would fail.
func checkRemotes(ctx context.Context, m *manifest.Manifest, server string, cfg Config, window time.Duration, out, errOut io.Writer) error {
	if len(m.RemoteSubjects()) == 0 {
		return nil
	}
	nc, _, err := connectNATS(server, cfg.NATS, cfg.newLogger(errOut))
	if err != nil {
		return err
	}
	defer nc.Close()
	infos, err := discovery.Infos(ctx, nc, window)
	if err != nil {
		return fmt.Errorf("asking %s for its micro services: %w", redactURLs(server), err)
	}
	problems := 0
	for i, f := range m.Functions {
		if !f.IsRemote() {
			continue
		}
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
