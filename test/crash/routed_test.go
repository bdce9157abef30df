package crash

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jetfn/jetfn"
)

// TestRoutedMessagesHideTheKeyFromTheSubject: a routed row's messages
// carry their key in header Order-Key and field "key" both, on a subject
// whose token 2 is not the key, and the keyless message, in the middle,
// has neither.
func TestRoutedMessagesHideTheKeyFromTheSubject(t *testing.T) {
	h := &Harness{runs: 7}
	o := Ordered{Kind: OrderedKill, Keys: 4, Messages: 3, Routed: RoutedByHeader, Keyless: true}
	msgs := h.orderMessages(o)
	if len(msgs) != 13 {
		t.Fatalf("%d messages, want 4 x 3 + 1", len(msgs))
	}
	if k := msgs[6]; k.key != "" || k.header.Get(orderKeyHeader) != "" || strings.Contains(string(k.data), `"key"`) {
		t.Errorf("message 6 %+v, want the keyless one", k)
	}
	sameToken := 0
	for i, m := range msgs {
		if m.key == "" {
			continue
		}
		var p struct{ Key string }
		if err := json.Unmarshal(m.data, &p); err != nil || p.Key != m.key || m.header.Get(orderKeyHeader) != m.key {
			t.Errorf("message %d (%s): field %q (%v), header %q", i, m.key, p.Key, err, m.header.Get(orderKeyHeader))
		}
		if strings.Split(m.subject, ".")[1] == m.key {
			sameToken++
		}
	}
	if sameToken > 0 {
		t.Errorf("%d messages with their key as subject token 2", sameToken)
	}
}

// TestCheckOrderFlagsAHandledKeylessMessage: the keyless message, were
// it handled, is a run, an effect and an output on a key (its subject
// token, s00) on which nothing was published.
func TestCheckOrderFlagsAHandledKeylessMessage(t *testing.T) {
	inputs, e := orderFixture()
	e.Applied["s00"] = []int64{6}
	e.Runs = append(e.Runs, orderRun{Key: "s00", Seq: 6, Delivery: 1, Before: []int64{}})
	id, _ := jetfn.OutputMsgID(orderedFunction, recordedSubject, "keyless")
	e.Outputs = append(e.Outputs, orderOutput{Key: "s00", Seq: 6, MsgID: id})
	v := checkOrder(orderedFunction, inputs, e)
	if len(v.Violations) != 3 {
		t.Fatalf("violations %q, want the effect, the run and the output of seq 6 on s00", v.Violations)
	}
	for _, s := range v.Violations {
		if !strings.Contains(s, "key s00") || !strings.Contains(s, "seq 6, which was not published on it") {
			t.Errorf("violation %q", s)
		}
	}
}
