// Package partition maps a message's key to one of n partitions exactly as
// nats-server's partition(n, ...) subject transform does, so a key jetfn
// reads from a header or a JSON field lands in the same partition as the
// same key taken from a subject token by the server (design/per-key-ordering.md).
package partition

import "hash/fnv"

// Of is the partition of key among n: FNV-1a 32 of its bytes, modulo n, as
// nats-server v2.15.2 computes it (server/subject_transform.go,
// getHashPartition). n must be positive.
func Of(key []byte, n int) int {
	h := fnv.New32a()
	_, _ = h.Write(key) // a hash.Hash never fails to write
	return int(h.Sum32() % uint32(n))
}
