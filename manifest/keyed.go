package manifest

import (
	"fmt"
	"strings"
	"time"
)

// A keyed function handles the messages of one key in order (ordered) or
// at most keyConcurrency of them at once, across all its instances. Its
// messages are copied by the server into a keyed stream, partitioned by a
// hash of the key as Kafka partitions a topic, and every partition is read
// by a consumer of its own with at most one (or keyConcurrency) message
// pending: the server itself never hands out a second message of a
// partition while one is unsettled (design/per-key-ordering.md).

// KeySpec says where a keyed function's message key comes from: exactly
// one of its fields. A subject token's key is hashed by the server itself
// as it copies the message into the keyed stream; a header's or a JSON
// field's is read by jetfn's router (runtime/router.go), which copies the
// messages in order, one instance at a time.
type KeySpec struct {
	// Token is the 1-based position of the key among the subject's
	// dot-separated tokens; it must be a * in every subject of the
	// function.
	Token int `yaml:"token"`
	// Header names the header holding the key (its first value).
	Header string `yaml:"header"`
	// Field names a top-level field of the JSON payload, a string or a
	// number.
	Field string `yaml:"field"`
}

// IsRouted reports whether jetfn's router copies the function's messages
// into its keyed stream: a key in a header or a payload field, which the
// server cannot hash.
func (f *FunctionSpec) IsRouted() bool { return f.Key != nil && f.Key.Token == 0 }

// RoutedPrefix starts the subjects of a routed keyed stream:
// <prefix><partition>.<original subject>.
func (f *FunctionSpec) RoutedPrefix() string { return "jetfn.keyed." + f.Name + "." }

// RouterDurable is the router's consumer on the input stream.
func (f *FunctionSpec) RouterDurable() string { return f.Durable + "-router" }

// RouterLease names the lease that lets one instance at a time route.
func (f *FunctionSpec) RouterLease() string { return "router." + f.Name }

// KeyedStreamPrefix starts the name of every keyed stream.
const KeyedStreamPrefix = "JETFN_KEYED_"

// MaxPartitions bounds a keyed function's partitions: each is a consumer
// every instance pulls.
const MaxPartitions = 1024

// IsKeyed reports whether the function orders or limits its messages per
// key.
func (f *FunctionSpec) IsKeyed() bool { return f.Ordered || f.KeyConcurrency > 0 }

// PerKey is how many messages of one key may be in flight at once, across
// every instance: 1 for an ordered function.
func (f *FunctionSpec) PerKey() int {
	if f.Ordered {
		return 1
	}
	return f.KeyConcurrency
}

// KeyedStreamName is the keyed stream of the function's messages.
func (f *FunctionSpec) KeyedStreamName() string { return KeyedStreamPrefix + f.Name }

// PartitionDurable is the durable consumer of partition i.
func (f *FunctionSpec) PartitionDurable(i int) string { return fmt.Sprintf("%s-p%03d", f.Durable, i) }

// Partition is the spec of partition i's binding: the function's handler
// and settings, reading the keyed stream's subjects of partition i through
// a consumer that never has more than PerKey messages pending. A partition
// starts at the keyed stream's first message: the keyed stream holds only
// what no partition consumer acknowledged yet.
func (f FunctionSpec) Partition(i int) FunctionSpec {
	p := f
	filter := fmt.Sprintf("%d.>", i)
	if f.IsRouted() {
		filter = fmt.Sprintf("%s%d.>", f.RoutedPrefix(), i)
	}
	p.Stream, p.Subject, p.Subjects = f.KeyedStreamName(), "", []string{filter}
	p.Durable = f.PartitionDurable(i)
	p.Concurrency, p.MaxAckPending = f.PerKey(), f.PerKey()
	noPrefetch := 0
	p.Prefetch = &noPrefetch
	p.Start, p.RenamedFrom = StartAll, ""
	return p
}

// SourceSpec is a stream's copy of another stream's messages, each subject
// rewritten by a transform. Only jetfn writes one, for a keyed stream; it
// is not read from a manifest.
type SourceSpec struct {
	Stream     string
	Transforms []Transform
	// StartTime, when set, skips what the source stored before it (a
	// keyed function's start: new or a time).
	StartTime *time.Time
	// StartSeq, when set, is the first input message the source copies:
	// the runtime sets it, for a keyed function pruned and added back, just
	// after what it had handled (runtime/keyedresume.go).
	StartSeq uint64
}

// Transform rewrites a subject matching Source into Destination.
type Transform struct{ Source, Destination string }

// KeyedStream is the stream that holds a keyed function's messages until
// they are handled: work-queue retention (a partition consumer's ack
// deletes its message), the input stream's storage and replicas, and no
// duplicate window, since the server copies each message exactly once and
// a replay must not be taken for a repeat. now is the start of a function
// that starts with new messages.
//
// A routed keyed stream has subjects of its own instead of a source, and a
// duplicate window: the router gives every copy the input message's
// identity as its ID, so what an instance taking over the routing copies
// again is dropped.
func (m *Manifest) KeyedStream(f FunctionSpec, now time.Time) StreamSpec {
	in, _ := m.Stream(f.Stream)
	if f.IsRouted() {
		return StreamSpec{Name: f.KeyedStreamName(), Retention: "workqueue", Storage: in.Storage, Replicas: in.Replicas,
			Subjects: []string{f.RoutedPrefix() + ">"}, Duplicates: RoutedDuplicates}
	}
	src := &SourceSpec{Stream: f.Stream, Transforms: f.PartitionTransforms()}
	if at, ok := f.StartTime(); ok {
		src.StartTime = &at
	} else if f.Start == StartNew {
		src.StartTime = &now
	}
	return StreamSpec{Name: f.KeyedStreamName(), Retention: "workqueue", Storage: in.Storage, Replicas: in.Replicas,
		Source: src}
}

// PartitionTransforms map each of the function's subjects to
// "<partition>.<subject>", the partition being nats-server's FNV-1a hash of
// the key token modulo Partitions (internal/partition computes the same).
func (f *FunctionSpec) PartitionTransforms() []Transform {
	var out []Transform
	for _, subj := range f.FilterSubjects() {
		tokens := strings.Split(subj, ".")
		dest := make([]string, len(tokens))
		wildcard, keyWildcard := 0, 0
		for i, t := range tokens {
			dest[i] = t
			if t == "*" {
				wildcard++
				dest[i] = fmt.Sprintf("{{wildcard(%d)}}", wildcard)
				if i+1 == f.Key.Token {
					keyWildcard = wildcard
				}
			}
		}
		out = append(out, Transform{Source: subj,
			Destination: fmt.Sprintf("{{partition(%d,%d)}}.%s", f.Partitions, keyWildcard, strings.Join(dest, "."))})
	}
	return out
}

// validateKey checks a keyed function's key, partitions and the options a
// keyed function cannot have yet.
func (m *Manifest) validateKey(fat place, f *FunctionSpec, add problemFunc) {
	switch {
	case f.Ordered && f.KeyConcurrency > 0:
		add(fat.Key("keyConcurrency"), "give ordered or keyConcurrency, not both: ordered is one message of a key at a time, in order")
	case f.KeyConcurrency < 0:
		add(fat.Key("keyConcurrency"), "%d must be at least 1", f.KeyConcurrency)
	case f.Key == nil && f.IsKeyed():
		add(fat.Key("key"), "required with ordered or keyConcurrency: where each message's key is, such as {token: 2}")
	case f.Key != nil && !f.IsKeyed() && !f.IsDebounced():
		add(fat.Key("key"), "nothing uses it: add ordered: true (one message of a key at a time, in order), keyConcurrency: n or debounce: a period")
	}
	if f.Partitions != 0 && !f.IsKeyed() && !f.IsDebounced() {
		add(fat.Key("partitions"), "only a keyed function (ordered or keyConcurrency) or a debounced one has partitions")
	}
	if r := f.KeyRateLimit; r != nil && !f.IsKeyed() {
		add(fat.Key("keyRateLimit"), "only a keyed function (key, with ordered or keyConcurrency) has a rate per key; "+
			"rateLimit limits the function as a whole")
	} else if r != nil && !r.valid() {
		add(fat.Key("keyRateLimit"), "%s: %s", r, rateBounds)
	}
	if f.Key == nil || !f.IsKeyed() && !f.IsDebounced() {
		return
	}
	if f.Partitions < 1 || f.Partitions > MaxPartitions {
		add(fat.Key("partitions"), "%d must be from 1 to %d", f.Partitions, MaxPartitions)
	}
	kat := fat.Key("key")
	sources := 0
	for _, set := range []bool{f.Key.Token != 0, f.Key.Header != "", f.Key.Field != ""} {
		if set {
			sources++
		}
	}
	switch {
	case sources != 1:
		add(kat, "give exactly one of token (a subject token), header or field (a top-level field of the JSON payload)")
	case f.Key.Header != "" && !headerName.MatchString(f.Key.Header):
		add(kat, "header %q is not a header name", f.Key.Header)
	case f.Key.Header != "" || f.Key.Field != "":
		// read by the router: any message may carry it
	case f.Key.Token < 1:
		add(kat, "token: want the 1-based position of the key in the subject, such as {token: 2} for orders.<id>.created")
	default:
		for _, subj := range f.FilterSubjects() {
			tokens := strings.Split(subj, ".")
			if f.Key.Token > len(tokens) || tokens[f.Key.Token-1] != "*" {
				add(kat, "token %d of subject %s is not a *: every message of that subject would have the same key "+
					"(or none); make the key's token a * in every subject", f.Key.Token, subj)
			}
		}
	}
	if f.RenamedFrom != "" && f.IsKeyed() {
		add(fat.Key("renamedFrom"), "a keyed function cannot be renamed yet: its keyed stream and partitions are named after it")
	}
}

// RoutedDuplicates is a routed keyed stream's duplicate window: longer
// than any takeover of the routing, after which the new router copies
// again what the old one copied and did not acknowledge.
const RoutedDuplicates = 10 * time.Minute

// keyedPositionKey is the positions bucket's key (the subject of its
// message) where the runtime records, when it prunes keyed function f, how
// far into its input f got.
func keyedPositionKey(f FunctionSpec) string {
	return "$KV." + PositionsBucket + ".consumer." + f.Stream + "." + f.KeyedStreamName()
}

// unkeyedSubjects are what a plain function's instance needs, when it
// makes the function's consumer, to find out how far the function got if
// it was ordered before (runtime/unkeyed.go): the keyed stream it may have
// left and that stream's first message, the router's consumer, and a
// message of the input found by time.
func unkeyedSubjects(f FunctionSpec) []string {
	ks := f.KeyedStreamName()
	return []string{"$JS.API.STREAM.INFO." + ks, "$JS.API.STREAM.MSG.GET." + ks,
		"$JS.API.CONSUMER.INFO." + f.Stream + "." + f.RouterDurable(), "$JS.API.STREAM.MSG.GET." + f.Stream}
}

// keyedPruneSubjects are what pruning keyed function f needs besides the
// deletions: reading its keyed stream's first message and, for a
// subject-token key, a message of the input found by time, to record how
// far f got (runtime/keyedresume.go).
func keyedPruneSubjects(f FunctionSpec) []string {
	out := []string{"$JS.API.STREAM.MSG.GET." + f.KeyedStreamName(), keyedPositionKey(f)}
	if !f.IsRouted() {
		out = append(out, "$JS.API.STREAM.MSG.GET."+f.Stream)
	}
	return out
}

// keyedSubjects are what a keyed function's instance needs beyond its
// input: its keyed stream's lookup and every partition consumer's pull,
// ack and lookup (the keyed stream is jetfn's, so a wildcard names its
// partitions), and with provisioning the stream's and consumers' creation.
// The server copies the input into the keyed stream itself, with no
// permission of the instance's.
func keyedSubjects(f FunctionSpec, provision bool) []string {
	ks := f.KeyedStreamName()
	subjects := []string{"$JS.API.STREAM.INFO." + ks, "$JS.API.CONSUMER.MSG.NEXT." + ks + ".*",
		"$JS.ACK." + ks + ".>", "$JS.API.CONSUMER.INFO." + ks + ".*"}
	if provision {
		subjects = append(subjects, "$JS.API.STREAM.CREATE."+ks, "$JS.API.STREAM.UPDATE."+ks,
			"$JS.API.CONSUMER.CREATE."+ks+".*", "$JS.API.CONSUMER.CREATE."+ks+".*.>", "$JS.API.CONSUMER.NAMES."+ks,
			// Where a function pruned and added back resumes (runtime/keyedresume.go).
			"$JS.API.DIRECT.GET.KV_"+PositionsBucket+"."+keyedPositionKey(f))
	}
	if f.IsRouted() {
		in, d := f.Stream, f.RouterDurable()
		subjects = append(subjects, f.RoutedPrefix()+">", "$JS.API.CONSUMER.MSG.NEXT."+in+"."+d, "$JS.ACK."+in+"."+d+".>",
			"$JS.API.CONSUMER.INFO."+in+"."+d, "$JS.API.CONSUMER.RESET."+in+"."+d)
		if provision {
			subjects = append(subjects, "$JS.API.CONSUMER.CREATE."+in+"."+d, "$JS.API.CONSUMER.CREATE."+in+"."+d+".>")
		}
	}
	return subjects
}
