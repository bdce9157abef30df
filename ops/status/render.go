package status

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jetfn/jetfn/internal/textfit"
	"github.com/jetfn/jetfn/wire"
)

// maxErrorWidth keeps a long last error from pushing the table off screen;
// --json has it whole.
const maxErrorWidth = 60

// WriteTable prints one row per instance, with uptimes measured at now.
func WriteTable(w io.Writer, instances []Instance, now time.Time) error {
	err := textfit.Table(w, "no jetfn function instances answered", "FUNCTION\tVERSION\tREVISION\tINSTANCE\tHANDLED\tACKED\tRETRIED\tDEAD\tIN FLIGHT\tPENDING\tACK PENDING\tUPTIME\tLAST ERROR",
		instances, func(i Instance) string {
			s := i.Stats
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s",
				i.Function, i.Version, revision(i), i.ID, s.Handled, s.Acked, s.Retried, s.DeadLettered, s.InFlight,
				s.NumPending, s.NumAckPending, formatUptime(i.Uptime(now)), truncate(problem(s), maxErrorWidth))
		})
	if err != nil || len(instances) == 0 {
		return err
	}
	if err := writeKeys(w, instances, now); err != nil {
		return err
	}
	return writeRemotes(w, instances)
}

// problem is what most explains an instance's trouble: a missing consumer
// explains an idle function better than a remote's error, and either
// better than the last handler error.
func problem(s wire.Stats) string {
	paused := ""
	if s.PausedUntil != nil {
		paused = "paused until " + pausedUntil(*s.PausedUntil) + " (jetfn resume)"
	}
	return cmp.Or(s.ConsumerError, paused, s.RemoteError, s.LastError)
}

// pausedUntil is a pause's end, or "resumed" for one without --until.
func pausedUntil(t time.Time) string {
	if t.After(time.Now().AddDate(50, 0, 0)) {
		return "resumed"
	}
	return t.Format(time.RFC3339)
}

// revision is the deployment revision an instance runs, with the digest of
// its manifest, so instances left on another revision stand out; "-" and
// the digest for an instance that runs a manifest file.
func revision(i Instance) string {
	digest := i.Stats.ManifestDigest // what it runs now; the metadata's is what the function was bound with
	if digest == "" {
		digest = i.ManifestDigest
	}
	if digest == "" {
		digest = "-"
	}
	if i.Stats.Revision == 0 {
		return "- (" + digest + ")"
	}
	return fmt.Sprintf("%d (%s)", i.Stats.Revision, digest)
}

// WriteJSON prints the instances as one JSON array on one line, so that
// --watch --json is a stream of lines.
func WriteJSON(w io.Writer, instances []Instance) error {
	if instances == nil {
		instances = []Instance{}
	}
	return json.NewEncoder(w).Encode(instances)
}

// formatUptime rounds to what a person reads at a glance: 42s, 5m3s, 3h12m,
// 2d4h.
func formatUptime(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 24*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	days := d / (24 * time.Hour)
	return fmt.Sprintf("%dd%dh", days, (d-days*24*time.Hour)/time.Hour)
}

// truncate fits s into a column of n runes; an empty cell reads "-".
func truncate(s string, n int) string {
	if s == "" {
		return "-"
	}
	return textfit.Truncate(s, n)
}
