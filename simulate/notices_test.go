package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/events"
)

// TestNoticesPrintInPublishOrder: with several events handled at once the
// notices arrive in any order; the table lists them in the order the
// backend published the events.
func TestNoticesPrintInPublishOrder(t *testing.T) {
	script := recordingScript("rec-1", "conv-1", time.UnixMilli(1_700_000_006_000), false)
	arrival := []int{1, 0, 3, 2, 4, 6, 5}
	ch := make(chan *nats.Msg, len(script))
	for _, i := range arrival {
		ev := script[i]
		state := ev.Event
		if ev.Event == events.RecordingStarted {
			state = events.RecordingStopRequested // handled after stop-requested was recorded
		}
		data, err := json.Marshal(events.RecordingNotice{RecordingID: ev.RecordingID, Event: ev.Event, TS: ev.TS, State: state})
		if err != nil {
			t.Fatal(err)
		}
		ch <- &nats.Msg{Data: data}
	}
	var out bytes.Buffer
	if err := printNotices(context.Background(), &out, ch, script); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] != "EVENT" && f[0] != "notices," && !strings.HasPrefix(f[0], "(") {
			got = append(got, f[0])
		}
	}
	var want []string
	for _, ev := range script {
		want = append(want, string(ev.Event))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("notices printed as\n%s\nwant the events in publish order: %v", out.String(), want)
	}
	if !strings.Contains(out.String(), "STATE is the recording's state when the function handled that event") {
		t.Errorf("no note on the started row's later state:\n%s", out.String())
	}
}
