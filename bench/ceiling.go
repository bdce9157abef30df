package bench

// Issue 34's fifth figure: the server's own ceiling. The NATS CLI's
// `nats bench js consume` drains the same stored backlog with explicit
// acknowledgements, sent and forgotten as jetfn's are, and confirmed
// (--doubleack), each on a fresh server; jetfn's one instance drains it
// as in instances.go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// CeilingRow is the CLI's rate with each kind of acknowledgement and
// jetfn's on the same backlog.
type CeilingRow struct {
	Messages                  int
	CLIExplicit, CLIConfirmed float64
	Jetfn                     float64
}

func (r CeilingRow) String() string {
	return fmt.Sprintf("%d stored: nats bench js consume %.0f msgs/s (acks sent), %.0f msgs/s (acks confirmed); jetfn %.0f msgs/s: %.2f× and %.2f×",
		r.Messages, r.CLIExplicit, r.CLIConfirmed, r.Jetfn, r.Jetfn/r.CLIExplicit, r.Jetfn/r.CLIConfirmed)
}

// RunCeiling measures the three on n stored messages.
func RunCeiling(ctx context.Context, n int, progress func(string)) (CeilingRow, error) {
	row := CeilingRow{Messages: n}
	var err error
	if row.CLIExplicit, err = cliConsume(ctx, n, false); err != nil {
		return row, err
	}
	if row.CLIConfirmed, err = cliConsume(ctx, n, true); err != nil {
		return row, err
	}
	one, err := runInstancesOnce(ctx, 1, n)
	if err != nil {
		return row, err
	}
	row.Jetfn = one.Rate()
	progress(row.String())
	return row, nil
}

// cliRate is the rate line `nats bench` prints.
var cliRate = regexp.MustCompile(`([0-9,]+) msgs/sec`)

// cliConsume runs `nats bench js consume` on a fresh server's stored
// backlog of n messages and reads its rate.
func cliConsume(ctx context.Context, n int, confirmed bool) (float64, error) {
	ns, nc, stop, err := serverWithBacklog(ctx, "ceiling", n)
	if err != nil {
		return 0, err
	}
	defer stop()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	// The CLI binds an existing durable: the settings jetfn's consumer
	// has by default.
	if _, err := js.CreateConsumer(ctx, "BACKLOG", jetstream.ConsumerConfig{Durable: "ceiling", FilterSubject: "backlog.in",
		AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		return 0, err
	}
	args := []string{"tool", "nats", "bench", "js", "consume", "--server", ns.ClientURL(), "--stream", "BACKLOG",
		"--consumer", "ceiling", "--filter", "backlog.in", "--msgs", strconv.Itoa(n), "--no-progress"}
	if confirmed {
		args = append(args, "--doubleack")
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("nats bench js consume: %w\n%s", err, out.String())
	}
	m := cliRate.FindStringSubmatch(out.String())
	if m == nil {
		return 0, errors.New("nats bench js consume printed no rate:\n" + out.String())
	}
	return strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
}
