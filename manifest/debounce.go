package manifest

import (
	"strconv"
	"strings"
	"time"
)

// A debounced function (debounce: 5s, with key:) runs once per burst of a
// key's messages, with the burst's last message, once the key has been
// quiet for the period. It is built on the server's message schedules, so
// it survives restarts and runs once across every instance:
//
//   - jetfn's debouncer reads the input through a consumer of its own that
//     hands out one message at a time across every instance (so a key's
//     messages are taken in stream order), and for each stores, in one
//     atomic batch in the function's debounce stream, a receipt named
//     after the input message (its message ID makes a redelivered input a
//     duplicate, which the batch refuses whole) and a one-shot schedule on
//     the key's wait subject, due a period later, carrying the message.
//     Each new schedule of a key replaces the one before it (the server
//     rolls the subject up), which is the debounce;
//   - when a schedule comes due, the server stores its message on the key's
//     run subject, in the key's partition, and that partition's consumer on
//     the debounce stream (one run pending at a time, so a key's runs keep
//     their order) runs the handler with it, as it would the input message.
//
// design/debounce.md says why, and what the handler side does about the
// server purging a schedule stored in the moment its predecessor fires.

// DebounceStreamPrefix starts the name of every debounce stream.
const DebounceStreamPrefix = "JETFN_DEBOUNCE_"

// MinDebounce is the shortest debounce period: the server keeps schedule
// times to the second.
const MinDebounce = time.Second

// IsDebounced reports whether the function debounces its messages per key.
func (f *FunctionSpec) IsDebounced() bool { return f.Debounce > 0 }

// DebounceStreamName is the stream of the function's receipts, schedules
// and due runs.
func (f *FunctionSpec) DebounceStreamName() string { return DebounceStreamPrefix + f.Name }

// DebounceSubject is the subject of one kind of the debounce stream's
// messages (DebounceSeen, DebounceWait, DebounceRun) for the key hashed to
// keyHash; "*" names them all.
func (f *FunctionSpec) DebounceSubject(kind, keyHash string) string {
	return "jetfn.debounce." + f.Name + "." + kind + "." + keyHash
}

// The kinds of a debounce stream's messages: a receipt of each input
// message, a key's waiting schedule, and a key's run come due.
const (
	DebounceSeen = "seen"
	DebounceWait = "wait"
	DebounceRun  = "run"
)

// DebouncerDurable is the debouncer's consumer on the input stream.
func (f *FunctionSpec) DebouncerDurable() string { return f.Durable + "-debouncer" }

// DebounceRunSubject is the run subject of the key hashed to keyHash: in
// its partition (partition.Of the key, over Partitions), which one
// consumer reads, one run at a time.
func (f *FunctionSpec) DebounceRunSubject(partition int, keyHash string) string {
	return f.DebounceSubject(DebounceRun, strconv.Itoa(partition)+"."+keyHash)
}

// DebouncedPartition is the spec of the binding that runs the handler on
// partition i's due runs: the function's settings, reading the run
// subjects of partition i from the first message the stream still holds
// (it holds only runs not yet acknowledged: work-queue retention),
// through a consumer that hands out one run at a time across every
// instance. So a key's runs are handled in the order they came due, a
// retried run holding the key's next; the function's concurrency is its
// partitions at once.
func (f FunctionSpec) DebouncedPartition(i int) FunctionSpec {
	p := f
	p.Stream, p.Subject, p.Subjects = f.DebounceStreamName(), "", []string{f.DebounceRunSubject(i, "*")}
	p.Durable = f.PartitionDurable(i)
	p.Concurrency, p.MaxAckPending = 1, 1
	noPrefetch := 0
	p.Prefetch = &noPrefetch
	p.Start, p.RenamedFrom, p.Schedule = StartAll, "", nil
	return p
}

// DebounceWindow is the debounce stream's duplicate window and how long a
// receipt is kept: twice the longest a redelivered input can come after
// its batch was stored (every instance down for maxOutage, then an ack
// wait for each allowed delivery).
func (f *FunctionSpec) DebounceWindow() time.Duration {
	return 2 * (f.MaxOutage + time.Duration(f.MaxDeliver)*f.AckWait)
}

// DebounceStream is the stream that holds a debounced function's
// receipts, waiting schedules and due runs: work-queue retention (an
// acknowledged run is deleted; receipts expire by their TTL, schedules
// when they fire), the input stream's storage and replicas.
func (m *Manifest) DebounceStream(f FunctionSpec) StreamSpec {
	in, _ := m.Stream(f.Stream)
	return StreamSpec{Name: f.DebounceStreamName(), Retention: "workqueue", Storage: in.Storage, Replicas: in.Replicas,
		Subjects: []string{"jetfn.debounce." + f.Name + ".>"}, Duplicates: f.DebounceWindow(),
		AllowSchedules: true, AllowAtomic: true, AllowTTL: true}
}

// validateDebounce checks debounce: against the keys it needs and the
// features it does not combine with yet.
func (m *Manifest) validateDebounce(fat place, f *FunctionSpec, add problemFunc) {
	if f.Debounce == 0 {
		return
	}
	at := fat.Key("debounce")
	switch {
	case f.Debounce < MinDebounce:
		add(at, "%s is shorter than %s: the server keeps schedule times to the second", f.Debounce, MinDebounce)
	case f.Key == nil:
		add(at, "needs key: where each message's key is ({token: n}, {header: H} or {field: F}): "+
			"a burst of one key's messages runs the function once, with the last")
	case f.IsKeyed():
		add(at, "cannot be combined with ordered or keyConcurrency: a debounced function already runs a key's bursts one at a time, in order")
	case f.Schedule != nil:
		add(at, "cannot be combined with schedule: ticks have no key to debounce")
	case f.RenamedFrom != "":
		add(fat.Key("renamedFrom"), "a debounced function cannot be renamed yet: its debounce stream is named after it")
	case strings.ContainsAny(f.Name, ".*> "):
		add(fat.Key("name"), "%q: a debounced function's name is a subject token of its debounce stream: no dots, wildcards or spaces", f.Name)
	}
}

// debounceSubjects are what a debounced function's instance needs beyond
// its input: the debouncer's consumer on the input (pull, ack, lookup,
// and a dead letter for a message without its key, which every function
// may publish); its debounce stream's receipts and schedules, published
// in atomic batches, and the last receipt and schedule of a key, read by
// subject; and the consumer of its runs. With provisioning, the stream's
// and both consumers' creation.
func debounceSubjects(f FunctionSpec, provision bool) []string {
	in, d, ds := f.Stream, f.DebouncerDurable(), f.DebounceStreamName()
	subjects := []string{"$JS.API.CONSUMER.MSG.NEXT." + in + "." + d, "$JS.ACK." + in + "." + d + ".>",
		"$JS.API.CONSUMER.INFO." + in + "." + d,
		"jetfn.debounce." + f.Name + ".>", "$JS.API.STREAM.INFO." + ds, "$JS.API.STREAM.MSG.GET." + ds,
		"$JS.API.DIRECT.GET." + ds + ".>",
		"$JS.API.CONSUMER.NAMES." + ds}
	for i := range f.Partitions {
		p := f.PartitionDurable(i)
		subjects = append(subjects, "$JS.API.CONSUMER.MSG.NEXT."+ds+"."+p, "$JS.ACK."+ds+"."+p+".>", "$JS.API.CONSUMER.INFO."+ds+"."+p)
		if provision {
			subjects = append(subjects, "$JS.API.CONSUMER.CREATE."+ds+"."+p, "$JS.API.CONSUMER.CREATE."+ds+"."+p+".>")
		}
	}
	if provision {
		subjects = append(subjects, "$JS.API.STREAM.CREATE."+ds, "$JS.API.STREAM.UPDATE."+ds,
			"$JS.API.CONSUMER.CREATE."+in+"."+d, "$JS.API.CONSUMER.CREATE."+in+"."+d+".>")
	}
	return subjects
}
