package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// The generated part of the benchmarks doc lies between these markers, so
// a new run replaces the numbers and keeps the prose around them.
const (
	docStart = "<!-- bench:results:start (written by jetfn-bench; edits here are overwritten) -->"
	docEnd   = "<!-- bench:results:end -->"
)

// errAgainstItself refuses to publish an A/A run as results: its "jetfn"
// columns are the baseline's second side.
var errAgainstItself = errors.New("an A/A run (AgainstItself) compares the baseline with itself: it writes no doc or chart")

// UpdateDoc writes the report between the markers of the Markdown file at
// path, creating the file (markers only) if it does not exist. chart is
// the chart's path relative to the doc; command is how the run was started.
// It refuses an A/A run's report.
func UpdateDoc(path string, r *Report, chart, command string) error {
	if r.Config.AgainstItself {
		return errAgainstItself
	}
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		old = []byte(docStart + "\n" + docEnd + "\n")
	} else if err != nil {
		return err
	}
	before, rest, ok1 := strings.Cut(string(old), docStart)
	_, after, ok2 := strings.Cut(rest, docEnd)
	if !ok1 || !ok2 {
		return fmt.Errorf("updating %s: markers %q and %q not found", path, docStart, docEnd)
	}
	var b bytes.Buffer
	b.WriteString(before + docStart + "\n\n")
	r.writeResults(&b, chart, command)
	b.WriteString("\n" + docEnd + after)
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func (r *Report) writeResults(b *bytes.Buffer, chart, command string) {
	fmt.Fprintf(b, "Run on %s with `%s`, %d repetitions per variant, wall time %s.\n\n",
		time.Now().UTC().Format("2006-01-02"), command, r.Repetitions, r.Wall.Round(time.Second))
	fmt.Fprintf(b, "Machine: %s.\n\n", r.Machine)
	if goals := r.GoalRows(); len(goals) > 0 {
		fmt.Fprintf(b, "The goals, one row per case. Base and jetfn are each side's medians; \"jetfn vs base\" and the cost columns "+
			"are medians of the pairs' own ratios (or differences), which is what the targets judge, and in brackets the range "+
			"that holds that median with %.1f %% probability (%s); the slow case is one run each:\n\n",
			100*medianCoverageOf(r.Repetitions), rangeRule(r.Repetitions))
		r.writeGoalsMarkdown(b)
		b.WriteString("\nAll figures:\n\n")
	}
	r.WriteMarkdown(b)
	b.WriteString("\nTargets (goals, judged on the worst row):\n\n")
	for _, t := range r.Targets() {
		mark := "met"
		if !t.Met {
			mark = "**missed**"
		}
		fmt.Fprintf(b, "- %s: %s (%s)\n", t.Goal, mark, t.Detail)
	}
	if chart != "" {
		fmt.Fprintf(b, "\n![throughput by concurrency, raw vs jetfn](%s)\n", chart)
	}
}

// medianCoverageOf is the coverage of the goal rows' ranges with n pairs.
func medianCoverageOf(n int) float64 { return medianCoverage(n, medianRank(n)) }

// rangeRule says which pairs bound the range with n pairs.
func rangeRule(n int) string {
	k := medianRank(n)
	if k == 1 {
		return fmt.Sprintf("the lowest to the highest of the %d pairs", n)
	}
	return fmt.Sprintf("the %s lowest to the %s highest of the %d pairs", ordinal(k), ordinal(k), n)
}

func ordinal(k int) string {
	switch k {
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	}
	return fmt.Sprintf("%dth", k)
}
