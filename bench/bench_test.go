package bench

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as its own child process, as the
// command does.
func TestMain(m *testing.M) {
	RunIfChild()
	os.Exit(m.Run())
}

// TestRunSmall runs the whole harness once with tiny counts, so it keeps
// compiling and working. It checks that every figure was measured, never
// how fast anything was.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nats-server, FerretDB and child processes")
	}
	cfg := DefaultConfig()
	cfg.Repetitions = 1
	cfg.Concurrencies = []int{1, 4}
	cfg.Sizes = []int{128}
	cfg.Messages = func(int) int { return 300 }
	cfg.RateMessages = 300
	cfg.DrainMessages = 3000 // on tmpfs 300 drained before the parent saw the first ack
	cfg.SlowMessages, cfg.SlowHandler, cfg.SlowAckWait, cfg.SlowLimit = 20, 20*time.Millisecond, time.Second, 10*time.Second
	cfg.Sessions = []int{2}
	cfg.SessionsPerRep = func(int) int { return 6 }
	cfg.SegmentsPerSession = 3
	cfg.ProfileDir = t.TempDir()
	cfg.Progress = func(line string) { t.Log(line) }
	report, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Rows) != 10 { // noop ×2, budget ×2, rate, drain ×2, slow, e2e, trace
		t.Fatalf("%d rows, want 10", len(report.Rows))
	}
	if report.TraceExports == 0 {
		t.Error("the trace case's sink received no export: the traced variant traced nothing")
	}
	_, procIOErr := os.Stat("/proc/self/io")
	for _, row := range report.Rows {
		for _, s := range []Stats{row.Base, row.Jetfn} {
			if s.Rate <= 0 || s.AllocsPerMsg <= 0 || s.CPUMicros <= 0 || s.PeakRSSMB <= 0 || (row.hasLatency() && s.P99Millis <= 0) ||
				(procIOErr == nil && s.WritesPerMsg <= 0) {
				t.Errorf("%s: unmeasured figure in %+v", row.Case(), s)
			}
		}
	}
	checkOutputs(t, report, cfg.ProfileDir)
}

// checkOutputs renders the table, the chart and the doc section.
func checkOutputs(t *testing.T, report *Report, profiles string) {
	t.Helper()
	var table bytes.Buffer
	if err := report.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	table.WriteString("\n")
	if err := report.WriteGoals(&table); err != nil {
		t.Fatal(err)
	}
	table.WriteString("\n")
	report.WriteTargets(&table)
	t.Logf("\n%s", table.String())
	var chart bytes.Buffer
	if err := report.WriteChart(&chart); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&chart); err != nil {
		t.Errorf("chart is not a PNG: %v", err)
	}
	doc := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(doc, []byte("# prose\n"+docStart+"\nold\n"+docEnd+"\nmore prose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := UpdateDoc(doc, report, "chart.png", "jetfn-bench"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(doc)
	if s := string(got); strings.Contains(s, "\nold\n") || !strings.Contains(s, "more prose") || !strings.Contains(s, "| e2e c=2 |") {
		t.Errorf("doc section not replaced in place:\n%s", s)
	}
	if matches, _ := filepath.Glob(filepath.Join(profiles, "*.cpu.pprof")); len(matches) != 20 {
		t.Errorf("%d CPU profiles, want one per child (20)", len(matches))
	}
	if len(report.GoalRows()) != 9 {
		t.Errorf("%d goal rows, want 9 (one per row but trace, which has no goal)", len(report.GoalRows()))
	}
}

// TestGoals judges made-up rows: which targets each row has and which it
// misses.
func TestGoals(t *testing.T) {
	cfg := DefaultConfig()
	rep := func(rate, cpuMicros, allocs, p99Millis float64) sample {
		return sample{rate: rate, cpuPerMsg: time.Duration(cpuMicros * 1e3), allocsPerMsg: allocs,
			p99: time.Duration(p99Millis * 1e6), latencies: 14250}
	}
	row := func(workload string, concurrency int, base, jetfn sample) Row {
		return newRow(caseKey{workload: workload, concurrency: concurrency, size: 128}, [2][]sample{{base}, {jetfn}}, cfg)
	}
	base := rep(1000, 10, 5, 1)
	tests := []struct {
		name   string
		row    Row
		want   []string // GoalRow.Missed
		target string
	}{
		{name: "noop at parity", row: row(WorkloadNoop, 1, base, base), target: "≥ 0.95×"},
		{name: "noop slow and costly", row: row(WorkloadNoop, 1, base, rep(940, 13.1, 7.6, 1)),
			want: []string{"msgs/s", "allocs", "CPU"}, target: "≥ 0.95×"},
		{name: "drain c=1 judged on throughput", row: row(WorkloadDrain, 1, base, rep(900, 10, 5, 1)),
			want: []string{"msgs/s"}, target: "≥ 0.95×"},
		{name: "drain c=16 shown, judged on cost", row: row(WorkloadDrain, 16, base, rep(500, 10, 8, 1)),
			want: []string{"allocs"}, target: "shown"},
		{name: "slow not judged on cost", row: row(WorkloadSlow, 1, base, rep(1000, 50, 50, 1)), target: "jetfn 0"},
		{name: "rate p99", row: row(WorkloadRate, 16, base, rep(1000, 10, 5, 1.3)),
			want: []string{"p99"}, target: "≤ +0.20 ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report := &Report{Rows: []Row{tt.row}, Config: cfg}
			g := report.GoalRows()
			if len(g) != 1 {
				t.Fatalf("%d goal rows, want 1", len(g))
			}
			if !slices.Equal(g[0].Missed, tt.want) || g[0].Target != tt.target {
				t.Errorf("missed %q, target %q; want %q, %q", g[0].Missed, g[0].Target, tt.want, tt.target)
			}
		})
	}
}

// TestP99Basis: the rate case's p99 over 14,250 latencies has 142 above
// it, 28.4 ms of traffic at 5,000/s.
func TestP99Basis(t *testing.T) {
	row := Row{Workload: WorkloadRate, Base: Stats{Latencies: 14250}, Jetfn: Stats{Latencies: 14250}, cfg: DefaultConfig()}
	if got, want := p99Basis(row), "over 14250 msgs (142 above it = 28.4 ms of traffic)"; got != want {
		t.Errorf("p99Basis = %q, want %q", got, want)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, ms(i))
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{name: "empty", p: 50, want: 0},
		{name: "one value", sorted: []time.Duration{ms(7)}, p: 99, want: ms(7)},
		{name: "p50 of 1..100", sorted: hundred, p: 50, want: ms(50)},
		{name: "p99 of 1..100", sorted: hundred, p: 99, want: ms(99)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(p%d) = %s, want %s", tt.p, got, tt.want)
			}
		})
	}
}

func TestAckedSequence(t *testing.T) {
	tests := []struct {
		name          string
		subject       string
		want          uint64
		wantDelivered uint64
		wantOK        bool
	}{
		{name: "v2", subject: "$JS.ACK._.ACCHASH.BENCH.noop.1.42.40.1700000000.3.RND", want: 42, wantDelivered: 1, wantOK: true},
		{name: "v1 redelivered", subject: "$JS.ACK.BENCH.noop.3.42.40.1700000000.3", want: 42, wantDelivered: 3, wantOK: true},
		{name: "other consumer", subject: "$JS.ACK.BENCH.other.1.42.40.1700000000.3"},
		{name: "short", subject: "$JS.ACK.BENCH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, delivered, ok := ackedSequence(tt.subject, noopWorkload)
			if got != tt.want || delivered != tt.wantDelivered || ok != tt.wantOK {
				t.Errorf("ackedSequence = %d, %d, %v; want %d, %d, %v", got, delivered, ok, tt.want, tt.wantDelivered, tt.wantOK)
			}
		})
	}
}

// TestPairedStatsCancelDrift: the machine doubled its speed between two
// pairs and jetfn was 10 % faster in one and 10 % slower in the other.
// The pairs' ratios say "even"; the quotient of the medians (145 / 150)
// would say jetfn is 3 % slower. Pure logic.
func TestPairedStatsCancelDrift(t *testing.T) {
	base := []sample{{rate: 100, p99: 2 * time.Millisecond}, {rate: 200, p99: time.Millisecond}}
	jetfn := []sample{{rate: 110, p99: 3 * time.Millisecond}, {rate: 180, p99: 2 * time.Millisecond}}
	p := pairedStats(base, jetfn)
	if p.Rate < 0.999 || p.Rate > 1.001 {
		t.Errorf("paired rate ratio = %.3f, want 1.000 (median of 1.1 and 0.9)", p.Rate)
	}
	if p.AddedP99Millis < 0.999 || p.AddedP99Millis > 1.001 {
		t.Errorf("paired added p99 = %.3f ms, want 1.000", p.AddedP99Millis)
	}
	if got := pairOrder(0)[0]; got != 0 {
		t.Errorf("pair 1 starts with variant %d, want the baseline", got)
	}
	if got := pairOrder(1)[0]; got != 1 {
		t.Errorf("pair 2 starts with variant %d, want jetfn", got)
	}
}

// TestMedianRange: the order-statistic interval for the median of 9 pairs
// is the 2nd to the 8th value (96.1 %), of 5 the whole range (93.8 %).
// Pure logic.
func TestMedianRange(t *testing.T) {
	nine := []float64{0.9, 1.3, 0.8, 1.1, 1.0, 0.7, 1.2, 0.95, 1.05}
	if got, cov := medianRange(nine); got != [2]float64{0.8, 1.2} || cov < 0.960 || cov > 0.962 {
		t.Errorf("9 values: range %v, coverage %.4f; want [0.8 1.2], 0.961", got, cov)
	}
	five := []float64{3, 1, 2, 5, 4}
	if got, cov := medianRange(five); got != [2]float64{1, 5} || cov < 0.937 || cov > 0.938 {
		t.Errorf("5 values: range %v, coverage %.4f; want [1 5], 0.9375", got, cov)
	}
	if _, cov := medianRange([]float64{1}); cov != 0 {
		t.Errorf("1 value: coverage %.3f, want 0 (no range)", cov)
	}
	if got := rangeRule(9); got != "the 2nd lowest to the 2nd highest of the 9 pairs" {
		t.Errorf("rangeRule(9) = %q", got)
	}
}

// TestResampledMet: a bootstrap of the pairs says how firm a verdict is.
// A row of nine pairs, five at 1.00× and four at 0.90×, meets ≥ 0.95× when
// five or more of nine draws are 1.00×: binomial(9, 5/9) ≥ 5, 0.634. Two
// such rows must both meet it: 0.634², 0.403. A row of 1.2, 0.9 and 0.9
// meets it when two draws of three are 1.2: 7/27, 0.259 (by the mean it
// would be 0.70). A share of 1,000 resamples is within ±0.047 (three
// standard errors at worst) of its exact value. Pure logic.
func TestResampledMet(t *testing.T) {
	row := func(pairs ...float64) Row { return Row{Paired: Paired{Rates: pairs, AddedP99s: pairs}} }
	rates := func(r Row) []float64 { return r.Paired.Rates }
	mixed := row(1, 0.9, 1, 0.9, 1, 0.9, 1, 0.9, 1)
	tests := []struct {
		name string
		rows []Row
		g    goal
		want float64 // share of resamples, ±0.047
	}{
		{"every pair above", []Row{row(0.96, 1.2, 1.0)}, atLeast(goalRate), 1},
		{"every pair below", []Row{row(0.9, 0.94, 0.8)}, atLeast(goalRate), 0},
		{"one mixed row", []Row{mixed}, atLeast(goalRate), 0.634},
		{"two mixed rows, judged on the worst", []Row{mixed, mixed}, atLeast(goalRate), 0.403},
		{"the median, not the mean", []Row{row(1.2, 0.9, 0.9)}, atLeast(goalRate), 7.0 / 27},
		{"an upper bound (the p99's)", []Row{row(0.1, 0.3, 0.1)}, atMost(goalAddedP99), 20.0 / 27},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			met, ok := resampledMet(tt.rows, rates, tt.g)
			if share := float64(met) / resamples; !ok || share < tt.want-0.047 || share > tt.want+0.047 {
				t.Errorf("met in %d of %d resamples (ok %v), want %.3f ± 0.047", met, resamples, ok, tt.want)
			}
			if again, _ := resampledMet(tt.rows, rates, tt.g); again != met {
				t.Errorf("met in %d, then %d: the same run must give the same figure", met, again)
			}
		})
	}
	if _, ok := resampledMet([]Row{row(1)}, rates, atLeast(goalRate)); ok {
		t.Error("one pair: resampledMet answered, want no figure")
	}
}

// TestSidesAgainstItself: an A/A run puts the baseline on both sides and
// names the second one apart. Pure logic.
func TestSidesAgainstItself(t *testing.T) {
	c := caseKey{workload: WorkloadBudget, concurrency: 16, size: 128, prefetch: 16}
	r := &runner{cfg: Config{AgainstItself: true}}
	if got := r.sides(c); got != [2]string{variantRawBud, variantRawBud} {
		t.Errorf("A/A sides = %v, want the baseline twice", got)
	}
	if got := r.sideName(variantRawBud, 1); got != variantRawBud+"-b" {
		t.Errorf("A/A second side named %q", got)
	}
	plain := &runner{}
	if got := plain.sides(c); got != c.variants() {
		t.Errorf("sides = %v, want %v", got, c.variants())
	}
	if got := plain.sideName(variantJetfnBud, 1); got != variantJetfnBud {
		t.Errorf("second side named %q, want %q", got, variantJetfnBud)
	}
	aa := &Report{Config: Config{AgainstItself: true}}
	if err := UpdateDoc(filepath.Join(t.TempDir(), "benchmarks.md"), aa, "", "jetfn-bench"); err == nil {
		t.Error("UpdateDoc published an A/A run")
	}
	if err := aa.WriteChart(io.Discard); err == nil {
		t.Error("WriteChart drew an A/A run")
	}
	cfg := DefaultConfig()
	cfg.AgainstItself = true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "trace or slow") {
		t.Errorf("an A/A run with the trace case: Validate = %v, want a refusal", err)
	}
}
