package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn/manifest"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// probe is one thing an operator looks at. see returns what it shows now
// and whether that is what the stage wants.
type probe struct {
	name string
	want string
	see  func(ctx context.Context) (seen string, ok bool)
}

// awaitProbes polls every probe until all show what they should at once,
// and otherwise fails with each probe that did not: its want and what it
// showed last. Probes are read together because an operator reads them
// together; one that flickers back is not a pass.
func awaitProbes(ctx context.Context, t *testing.T, within time.Duration, stage string, probes []probe) {
	t.Helper()
	seen := make([]string, len(probes))
	ok := make([]bool, len(probes))
	pollUntil(ctx, within, 250*time.Millisecond, func(context.Context) bool {
		all := true
		for i, p := range probes {
			pctx, cancel := context.WithTimeout(ctx, attemptTimeout) // one each: `jetfn status` alone takes its --wait
			seen[i], ok[i] = p.see(pctx)
			cancel()
			all = all && ok[i]
		}
		return all
	})
	var b strings.Builder
	for i, p := range probes {
		if !ok[i] {
			fmt.Fprintf(&b, "\n  %s: want %s\n  %s  saw %s", p.name, p.want, strings.Repeat(" ", len(p.name)), seen[i])
		}
	}
	if b.Len() > 0 {
		t.Fatalf("%s: not every probe showed what it should within %s:%s", stage, within, b.String())
	}
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

func get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// readyzCheck is the name of the /readyz check the fix adds for consumers.
const readyzCheck = "consumers"

// readyzProbe wants /readyz to answer code; a 503 must also carry a
// `fail consumers: …` line naming the function, so the probe explains why.
func readyzProbe(addr string, code int) probe {
	want := fmt.Sprintf("%d", code)
	if code != http.StatusOK {
		want += fmt.Sprintf(" with a line `fail %s: …%s…`", readyzCheck, functionName)
	}
	return probe{name: "/readyz", want: want, see: func(ctx context.Context) (string, bool) {
		got, body, err := get(ctx, "http://"+addr+"/readyz")
		if err != nil {
			return err.Error(), false
		}
		seen := fmt.Sprintf("%d %q", got, body)
		if got != code {
			return seen, false
		}
		return seen, code == http.StatusOK || failLine(body)
	}}
}

func failLine(body string) bool {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "fail "+readyzCheck) && strings.Contains(line, functionName) {
			return true
		}
	}
	return false
}

// missingMetric is the gauge the fix exports, 1 while the function's
// consumer is missing.
const missingMetric = "jetfn_consumer_missing"

// metricProbe wants jetfn_consumer_missing{function="summarize-session"}
// to be want.
func metricProbe(addr string, want float64) probe {
	name := fmt.Sprintf("%s{function=%q}", missingMetric, functionName)
	return probe{name: "/metrics " + name, want: fmt.Sprint(want), see: func(ctx context.Context) (string, bool) {
		_, body, err := get(ctx, "http://"+addr+"/metrics")
		if err != nil {
			return err.Error(), false
		}
		v, found, err := sample(body, missingMetric, functionName)
		switch {
		case err != nil:
			return "unparsable /metrics: " + err.Error(), false
		case !found:
			return "no such sample (" + familyNames(body) + ")", false
		}
		return fmt.Sprint(v), v == want
	}}
}

// sample is the value of family's sample labelled function=fn.
func sample(body, family, fn string) (float64, bool, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	mf, ok := fams[family]
	if !ok {
		return 0, false, nil
	}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() != "function" || l.GetValue() != fn {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true, nil
			case m.Untyped != nil:
				return m.GetUntyped().GetValue(), true, nil
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true, nil
			}
		}
	}
	return 0, false, nil
}

// familyNames lists the jetfn_consumer_* families a scrape has, so a
// missing one shows what is there instead.
func familyNames(body string) string {
	var names []string
	for _, line := range strings.Split(body, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok && strings.HasPrefix(name, "jetfn_consumer") {
			names = append(names, strings.Fields(name)[0])
		}
	}
	return "jetfn_consumer families: " + strings.Join(names, ", ")
}

// statusWord is what `jetfn status` prints for a function without its
// consumer.
const statusWord = "missing"

// statusProbe wants `jetfn status` to print the function's row with the
// word missing.
func statusProbe(bin, natsURL string) probe {
	return probe{name: "jetfn status", want: fmt.Sprintf("a %s line with %q", functionName, statusWord),
		see: func(ctx context.Context) (string, bool) {
			cmd := exec.CommandContext(ctx, bin, "status", "--wait", "300ms")
			cmd.Env = []string{"NATS_URL=" + natsURL, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Sprintf("%v: %s", err, out), false
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, functionName) && strings.Contains(line, statusWord) {
					return line, true
				}
			}
			return fmt.Sprintf("%q", strings.TrimSpace(string(out))), false
		}}
}

// consumerErrorField is the field of the function's status (micro stats
// data and the status endpoint) that says what is wrong with its consumer.
const consumerErrorField = "consumer_error"

// consumerErrorProbe wants the function's status endpoint, the data `nats
// micro stats` shows, to carry a non-empty consumer_error.
func (f *deletedFixture) consumerErrorProbe() probe {
	subject := manifest.StatusSubject(functionName)
	return probe{name: subject, want: fmt.Sprintf("a non-empty %q", consumerErrorField),
		see: func(ctx context.Context) (string, bool) {
			msg, err := f.stack.nc.RequestWithContext(ctx, subject, nil)
			if err != nil {
				return err.Error(), false
			}
			var st map[string]any
			if err := json.Unmarshal(msg.Data, &st); err != nil {
				return fmt.Sprintf("%v: %s", err, msg.Data), false
			}
			v, _ := st[consumerErrorField].(string)
			if v == "" {
				return string(msg.Data), false
			}
			return fmt.Sprintf("%s=%q", consumerErrorField, v), true
		}}
}

// onceProbe wants every session in ss handled exactly once, counting
// transcript.processed from stream sequence from on.
func (f *deletedFixture) onceProbe(from uint64, ss ...session) probe {
	return probe{name: "sessions", want: "each with 1 summary and 1 transcript.processed, consumer settled",
		see: func(ctx context.Context) (string, bool) {
			tl := f.count(ctx, from, ss)
			done, _ := tl.once(ss)
			return tl.String(ss), done
		}}
}
