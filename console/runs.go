package console

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetfn/jetfn/internal/discovery"
	"github.com/jetfn/jetfn/manifest"
	"github.com/jetfn/jetfn/wire"
)

// runsWindow is how long a runs request waits for instances that have not
// answered yet; it returns as soon as every known instance has.
const runsWindow = time.Second

// maxRunsShown caps the merged list of a function's runs.
const maxRunsShown = 500

// runView is one run and the instance that remembers it.
type runView struct {
	wire.Run
	Instance string
}

// runsOf asks every instance of the function for its runs (expected is
// how many instances the last poll found) and merges them, newest first.
func (s *Server) runsOf(ctx context.Context, function string, expected int, q wire.RunsRequest) ([]runView, int, error) {
	replies, err := gatherRuns(ctx, s.cfg.NATS, function, expected, q)
	if err != nil {
		return nil, 0, err
	}
	var out []runView
	for _, reply := range replies {
		for _, r := range reply.Runs {
			out = append(out, runView{Run: r, Instance: reply.Instance})
		}
	}
	slices.SortFunc(out, func(a, b runView) int {
		return cmp.Or(b.Started.Compare(a.Started), cmp.Compare(a.Instance, b.Instance))
	})
	if len(out) > maxRunsShown {
		out = out[:maxRunsShown]
	}
	return out, len(replies), nil
}

// gatherRuns sends one request to the function's runs endpoint, which
// every instance answers, and collects the replies until expected have
// arrived or runsWindow has passed.
func gatherRuns(ctx context.Context, nc *nats.Conn, function string, expected int, q wire.RunsRequest) ([]wire.RunsReply, error) {
	body, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	var out []wire.RunsReply
	err = discovery.GatherEach(ctx, nc, manifest.RunsSubject(function), body, runsWindow, func(data []byte) bool {
		var r wire.RunsReply
		if json.Unmarshal(data, &r) == nil && r.Instance != "" {
			out = append(out, r)
		}
		return expected > 0 && len(out) >= expected
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
