package status

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jetfn/jetfn/wire"
	"github.com/nats-io/nats.go/micro"
)

func TestDecode(t *testing.T) {
	statsReply := func(name string, metadata map[string]string, endpoints ...*micro.EndpointStats) []byte {
		b, _ := json.Marshal(micro.Stats{ServiceIdentity: micro.ServiceIdentity{Name: name, ID: "id1", Version: "1.0.0", Metadata: metadata},
			Started: time.Unix(100, 0), Endpoints: endpoints})
		return b
	}
	data := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	tests := []struct {
		name        string
		reply       []byte
		wantOK      bool
		wantHandled uint64
	}{
		{name: "jetfn function", wantOK: true, wantHandled: 7,
			reply: statsReply("fn", nil, &micro.EndpointStats{Name: "status", Data: data(wire.Stats{Function: "fn", Handled: 7})})},
		{name: "digest only (stats endpoint without data)", wantOK: true,
			reply: statsReply("fn", map[string]string{"manifest_digest": "abc"}, &micro.EndpointStats{Name: "status"})},
		{name: "other service with a status endpoint", wantOK: false,
			reply: statsReply("other", nil, &micro.EndpointStats{Name: "status", Data: data(map[string]int{"up": 1})})},
		{name: "other service", wantOK: false, reply: statsReply("other", nil, &micro.EndpointStats{Name: "echo"})},
		{name: "not JSON", wantOK: false, reply: []byte("nope")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, ok := decode(tt.reply)
			if ok != tt.wantOK || inst.Stats.Handled != tt.wantHandled {
				t.Fatalf("decode = %+v, %v; want ok %v, handled %d", inst, ok, tt.wantOK, tt.wantHandled)
			}
			if ok && (inst.Stats.Function != "fn" || inst.Started.IsZero()) {
				t.Errorf("instance %+v lacks its function or start", inst)
			}
		})
	}
}

func TestFormatUptime(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "-"},
		{42*time.Second + 400*time.Millisecond, "42s"},
		{5*time.Minute + 3*time.Second, "5m3s"},
		{3*time.Hour + 12*time.Minute + 20*time.Second, "3h12m"},
		{52 * time.Hour, "2d4h"},
	}
	for _, tt := range tests {
		if got := formatUptime(tt.d); got != tt.want {
			t.Errorf("formatUptime(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// decode reads one $SRV.STATS reply as Collect does: unmarshal, then
// fromStats.
func decode(data []byte) (Instance, bool) {
	var st micro.Stats
	if err := json.Unmarshal(data, &st); err != nil {
		return Instance{}, false
	}
	return fromStats(st)
}

// TestRevisionColumn: each instance's row says which deployment revision
// and manifest it runs, so an instance left on another one stands out
// (issue 29, item 6).
func TestRevisionColumn(t *testing.T) {
	tests := []struct {
		name string
		in   Instance
		want string
	}{
		{name: "a deployment revision", in: Instance{ManifestDigest: "old", Stats: wire.Stats{Revision: 7, ManifestDigest: "abc123"}}, want: "7 (abc123)"},
		{name: "a manifest file", in: Instance{ManifestDigest: "abc123"}, want: "- (abc123)"},
		{name: "nothing known", in: Instance{}, want: "- (-)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := revision(tt.in); got != tt.want {
				t.Errorf("revision = %q, want %q", got, tt.want)
			}
		})
	}
}
