package reportsummaries_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/events"
	reportsummaries "github.com/jetfn/jetfn/functions/report-summaries"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/runtime"
	"github.com/jetfn/jetfn/runtime/runtimetest"
)

// scheduled is report-summaries ticking every second over an hour's
// window, as manifests/local.yaml declares it (there every minute).
const scheduled = `
streams:
  - {name: REPORT, subjects: ["report.>"], duplicates: 24h}
  - {name: DEADLETTER, subjects: ["deadletter.>"]}
functions:
  - name: report-summaries
    version: 1.0.0
    stream: REPORT
    subject: report.tick
    schedule: {every: 1s}
    outputs:
      - {subject: report.summaries, stream: REPORT}
    config:
      window: 1h
`

// TestReportCountsTheWindowBeforeTheTick: at each tick the function counts
// the summaries stored in the last whole hour before it, leaving the
// others out, and publishes the report under the window's end.
func TestReportCountsTheWindowBeforeTheTick(t *testing.T) {
	_, client := runtimetest.StartMongo(t)
	db := client.Database("report")
	now := time.Now().UTC()
	ctx := context.Background()
	var summaries []events.Summary
	for i := range 12 { // every quarter of an hour over three hours; odd ones complete
		sum := events.Summary{ID: fmt.Sprintf("c:%d", i), Complete: i%2 == 1, UpdatedAt: now.Add(-time.Duration(i*15+5) * time.Minute).Truncate(time.Millisecond)}
		if _, err := db.Collection(events.SummariesCollection).InsertOne(ctx, sum); err != nil {
			t.Fatal(err)
		}
		summaries = append(summaries, sum)
	}
	ns := runtimetest.StartNATS(t)
	nc := runtimetest.Connect(t, ns.ClientURL())
	m, err := manifest.Parse([]byte(scheduled))
	if err != nil {
		t.Fatal(err)
	}
	fns := []jetfn.Function{{Name: reportsummaries.Name, New: reportsummaries.New, CheckConfig: reportsummaries.CheckConfig}}
	rt, err := runtime.New(nc, m, fns, runtime.WithMongo(db))
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.RunInBackground(t, rt)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var stored *jetstream.RawStreamMsg
	runtimetest.Eventually(t, 20*time.Second, "a report", func() bool {
		s, err := js.Stream(ctx, "REPORT")
		if err == nil {
			stored, err = s.GetLastMsgForSubject(ctx, events.SummariesReportSubject)
		}
		return err == nil
	})
	var report events.SummariesReport
	if err := json.Unmarshal(stored.Data, &report); err != nil {
		t.Fatal(err)
	}
	var want, complete int
	for _, sum := range summaries {
		if !sum.UpdatedAt.Before(report.From) && sum.UpdatedAt.Before(report.To) {
			want++
			if sum.Complete {
				complete++
			}
		}
	}
	if report.Summaries != want || report.Complete != complete || report.To.Sub(report.From) != time.Hour || !report.To.Equal(report.To.Truncate(time.Hour)) {
		t.Fatalf("report %+v: want %d summaries, %d complete, over the whole hour before the tick", report, want, complete)
	}
	if id := stored.Header.Get(jetstream.MsgIDHeader); !strings.HasSuffix(id, ":"+report.To.Format(time.RFC3339)) {
		t.Fatalf("report ID %q, want it to end with the tick's time %s", id, report.To.Format(time.RFC3339))
	}
}

// TestConfig: the window must be a positive duration, named at its line.
func TestConfig(t *testing.T) {
	for block, want := range map[string]string{"window: 5m\n": "", "window: 0s\n": "window: 0s is not a positive duration", "windw: 5m\n": "windw"} {
		cfg, err := jetfn.ConfigFromYAML(block)
		if err != nil {
			t.Fatal(err)
		}
		err = reportsummaries.CheckConfig(cfg)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("config %q: err = %v, want %q", block, err, want)
		}
	}
}
