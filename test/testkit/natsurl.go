package testkit

import "strings"

// JoinURLs is the client URLs of nodes, comma-separated: the list NATS_URL
// and nats.Connect take, so a client can reach the cluster through any node
// that is up. The in-process cluster of test/scale and the process cluster
// of test/chaos hand it out alike.
func JoinURLs[N interface{ URL() string }](nodes []N) string {
	urls := make([]string, len(nodes))
	for i, nd := range nodes {
		urls[i] = nd.URL()
	}
	return strings.Join(urls, ",")
}
