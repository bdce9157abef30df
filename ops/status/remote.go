package status

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/nats-io/nats.go/micro"
)

// RemoteInstance is one micro service instance serving a remote function's
// endpoint, with the counters micro keeps for that endpoint.
type RemoteInstance struct {
	Service   string `json:"service"`
	Version   string `json:"version"`
	ID        string `json:"id"`
	Requests  int    `json:"requests"`
	Errors    int    `json:"errors"`
	LastError string `json:"last_error,omitempty"`
}

// attachRemotes gives every instance of a remote function (its "remote"
// metadata names the endpoint) the services in the same $SRV.STATS round
// whose endpoint has that subject.
func attachRemotes(instances []Instance, services []micro.Stats) {
	for i := range instances {
		subject := instances[i].Metadata["remote"]
		if subject == "" {
			continue
		}
		for _, st := range services {
			for _, ep := range st.Endpoints {
				if ep != nil && ep.Subject == subject {
					instances[i].RemoteInstances = append(instances[i].RemoteInstances, RemoteInstance{Service: st.Name,
						Version: st.Version, ID: st.ID, Requests: ep.NumRequests, Errors: ep.NumErrors, LastError: ep.LastError})
				}
			}
		}
		slices.SortFunc(instances[i].RemoteInstances, func(a, b RemoteInstance) int {
			return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.ID, b.ID))
		})
	}
}

// writeRemotes prints, once per remote function, the instances that serve
// its endpoint, or that none does; nothing when no function is remote.
func writeRemotes(w io.Writer, instances []Instance) error {
	seen := map[string]bool{}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, in := range instances {
		subject := in.Metadata["remote"]
		if subject == "" || seen[in.Function] {
			continue
		}
		if len(seen) == 0 {
			fmt.Fprintln(tw, "\nREMOTE FUNCTION\tSUBJECT\tSERVICE\tVERSION\tINSTANCE\tREQUESTS\tERRORS\tLAST ERROR")
		}
		seen[in.Function] = true
		if len(in.RemoteInstances) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t(no instance answered)\t-\t-\t-\t-\t-\n", in.Function, subject)
		}
		for _, r := range in.RemoteInstances {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", in.Function, subject, r.Service, r.Version, r.ID,
				r.Requests, r.Errors, truncate(r.LastError, maxErrorWidth))
		}
	}
	return tw.Flush()
}
