package status

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetfn/jetfn/internal/discovery"
	"github.com/jetfn/jetfn/wire"
)

// DefaultWindow is how long Collect waits for replies: instances answer in
// well under a millisecond on a healthy cluster, and a status table is worth
// half a second.
const DefaultWindow = 500 * time.Millisecond

// statsSubject asks every micro service on the account for its stats.
const statsSubject = "$SRV.STATS"

// statusEndpoint is the runtime's endpoint whose stats data is wire.Stats.
const statusEndpoint = "status"

// Instance is one running function in one process.
type Instance struct {
	Function       string            `json:"function"`
	Version        string            `json:"version"`
	ID             string            `json:"id"`
	Started        time.Time         `json:"started"`
	ManifestDigest string            `json:"manifest_digest,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Stats          wire.Stats        `json:"stats"`
	// RemoteInstances are, for a remote function, the micro service
	// instances that serve its endpoint (every instance of the function
	// lists the same ones).
	RemoteInstances []RemoteInstance `json:"remote_instances,omitempty"`
}

// Uptime is how long the instance has run at now.
func (i Instance) Uptime(now time.Time) time.Duration {
	if i.Started.IsZero() {
		return 0
	}
	return now.Sub(i.Started)
}

// Collect asks every micro service for its stats and returns the jetfn
// function instances that answered within window, sorted by function and
// instance id.
func Collect(ctx context.Context, nc *nats.Conn, window time.Duration) ([]Instance, error) {
	replies, err := discovery.Gather(ctx, nc, statsSubject, window)
	if err != nil {
		return nil, err
	}
	var out []Instance
	var services []micro.Stats
	for _, data := range replies {
		var st micro.Stats
		if json.Unmarshal(data, &st) != nil {
			continue
		}
		services = append(services, st)
		if inst, ok := fromStats(st); ok {
			out = append(out, inst)
		}
	}
	attachRemotes(out, services)
	sortInstances(out)
	return out, nil
}

// fromStats turns one service's $SRV.STATS reply into an Instance; ok is
// false for a service that is not a jetfn function.
func fromStats(st micro.Stats) (Instance, bool) {
	inst := Instance{
		Function: st.Name, Version: st.Version, ID: st.ID, Started: st.Started,
		ManifestDigest: st.Metadata["manifest_digest"], Metadata: st.Metadata,
	}
	found := false
	for _, ep := range st.Endpoints {
		if ep == nil || ep.Name != statusEndpoint || len(ep.Data) == 0 {
			continue
		}
		var s wire.Stats
		if json.Unmarshal(ep.Data, &s) == nil && s.Function != "" {
			inst.Stats, found = s, true
		}
	}
	if !found && inst.ManifestDigest == "" {
		return Instance{}, false
	}
	if inst.Stats.Function == "" {
		inst.Stats.Function = inst.Function
	}
	return inst, true
}

func sortInstances(in []Instance) {
	slices.SortFunc(in, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(a.Function, b.Function), cmp.Compare(a.ID, b.ID))
	})
}
