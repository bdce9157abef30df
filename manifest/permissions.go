package manifest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Permissions are the NATS subjects a runtime instance needs for a manifest
// and nothing more.
//
// They hold no allow_responses. That setting lets a user publish once to the
// reply subject of any message it receives, whatever the subject is: anyone
// allowed to send $SRV.PING could then make the instance publish its answer
// on a JetStream API subject (on a server with `jetstream { strict: false }`
// an answer sent to $JS.API.STREAM.PURGE.<stream> purges it) or into any
// other subject. It also counts one allowance per request, not per
// subscription, so one $SRV.PING delivered to two functions' services on
// the instance's one connection is answered by neither. Replies go instead
// to the inbox prefixes of PermissionOptions.ReplyPrefixes.
type Permissions struct {
	Publish   []string `json:"publish"`
	Subscribe []string `json:"subscribe"`
}

// ManifestBucket is the KV bucket that holds one key per deployment, each
// revision a manifest (package deploy stores and follows them).
const ManifestBucket = "jetfn-manifests"

// PositionsBucket is the KV bucket where each instance records its
// consumers' ack floors, so a consumer lost while jetfn was down resumes
// where it was instead of from the stream's start.
const PositionsBucket = "jetfn-positions"

// AttemptsBucket is the KV bucket where each instance records the handler
// runs it starts on redelivered messages, so maxDeliver counts runs, not
// deliveries that died before their handler started.
const AttemptsBucket = "jetfn-attempts"

// DefaultInboxPrefix is the inbox prefix of nats.go, of the nats CLI and
// of jetfn's own commands unless NATS_INBOX_PREFIX says otherwise.
const DefaultInboxPrefix = "_INBOX"

// PermissionOptions shape the generated permissions.
type PermissionOptions struct {
	// InboxPrefix is the instance's own inbox prefix (NATS_INBOX_PREFIX of
	// `jetfn run`; default _INBOX), where it subscribes for the answers to
	// its requests.
	InboxPrefix string
	// ReplyPrefixes are the inbox prefixes of the clients that ask the
	// instance something (default [_INBOX]): micro discovery ($SRV.PING,
	// INFO and STATS, sent by `nats micro ls`, `jetfn status` and the
	// console) and each function's status endpoint. A micro service answers
	// on whatever reply subject a request names, so the instance may
	// publish on <prefix>.> for each prefix and on no other reply subject:
	// a request that names one elsewhere gets no answer, and the server's
	// refusal shows in the instance's log. The price is that anyone allowed
	// to ask may direct an answer to any subject under these prefixes; a
	// prefix of the operators' own (NATS_INBOX_PREFIX=_OPS for their tools,
	// ReplyPrefixes [_OPS]) keeps it off every other client's inboxes.
	ReplyPrefixes []string
	// Provision adds the stream and consumer management rights that a
	// runtime needs when it creates and updates them itself.
	Provision bool
	// Deployment is the key in ManifestBucket the instance follows (jetfn
	// run --deployment NAME): it adds reading and watching that key, and
	// nothing that writes the bucket.
	Deployment string
	// Prune adds deleting each function's durable consumer (jetfn run
	// --prune, when a revision removes the function).
	Prune bool
}

// Validate reports every prefix that is not a literal subject (a wildcard
// would widen the rights it names), and every one in NATS's own $
// namespace, where a reply right would reopen the JetStream API to anyone
// who may ask.
func (o PermissionOptions) Validate() error {
	var errs []error
	check := func(what, prefix string) {
		if err := checkInboxPrefix(prefix); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w: %w", what, prefix, ErrInboxPrefix, err))
		}
	}
	if o.InboxPrefix != "" {
		check("inbox prefix", o.InboxPrefix)
	}
	for _, p := range o.ReplyPrefixes {
		check("reply prefix", p)
	}
	return errors.Join(errs...)
}

func checkInboxPrefix(prefix string) error {
	if err := checkSubject(prefix); err != nil {
		return err
	}
	if hasWildcard(prefix) {
		return errors.New("holds a wildcard")
	}
	if strings.HasPrefix(prefix, "$") {
		return errors.New("is in NATS's own $ namespace (JetStream, KV, micro)")
	}
	return nil
}

// Permissions lists what an instance running m needs: per function the pull
// (MSG.NEXT), ack and info APIs of its consumer, the stream lookup, its
// outputs and dead-letter subject and its micro subjects (the status and
// runs endpoints among them); for a remote function, its endpoint subject
// and $SRV.INFO; the replies of its micro services (replySubjects). A
// revision that adds a function needs permissions generated from it. o
// should pass Validate.
func (m *Manifest) Permissions(o PermissionOptions) Permissions {
	inbox := cmp.Or(o.InboxPrefix, DefaultInboxPrefix)
	pub, sub := newSubjectSet(), newSubjectSet()
	sub.add(inbox+".>", "$SRV.PING", "$SRV.INFO", "$SRV.STATS")
	for _, f := range m.Functions {
		s, d := f.Stream, f.Durable
		pub.add("$JS.API.CONSUMER.MSG.NEXT."+s+"."+d, "$JS.ACK."+s+"."+d+".>",
			"$JS.API.CONSUMER.INFO."+s+"."+d, "$JS.API.STREAM.INFO."+s,
			m.DeadLetterSubject(f.Name))
		pub.add(f.OutputSubjects()...)
		for _, subject := range f.DelayedOutputSubjects() {
			pub.add(DelaySubjects(subject)) // the schedule and receipt of a delayed output
		}
		if f.IsRemote() {
			// The requests, and the discovery that finds the remote's
			// instances for status and /readyz.
			pub.add(f.Remote.Subject, "$SRV.INFO")
		}
		sub.add("$SRV.*."+f.Name, "$SRV.*."+f.Name+".*", StatusSubject(f.Name), RunsSubject(f.Name))
		pub.add(positionSubjects(f, o.Provision)...)
		pub.add(attemptSubjects(f)...)
		if f.RateLimit != nil {
			pub.add(sharedKeySubjects(RatesBucket, f, o.Provision)...)
		}
		if o.Provision && f.HasScheduleSubject() && !f.IsKeyed() {
			// Keeping the schedule message (runtime/schedule.go): read the
			// stored one, write a new one or one that ends the ticks. A
			// function without a schedule needs it too: a deploy may have
			// removed the one an earlier revision kept.
			pub.add(f.ScheduleSubject(), "$JS.API.STREAM.MSG.GET."+f.Stream, "$JS.API.DIRECT.GET."+f.Stream+"."+f.ScheduleSubject())
		}
		if f.KeyRateLimit != nil && f.IsKeyed() {
			// One schedule per key, under the function's name.
			pub.add(sharedKeySubjects(RatesBucket, FunctionSpec{Name: KeyRateKeys(f.Name)}, o.Provision)...)
		}
		if f.Singleton {
			pub.add(sharedKeySubjects(LeasesBucket, f, o.Provision)...)
		}
		if f.IsKeyed() && f.IsRouted() {
			pub.add(sharedKeySubjects(LeasesBucket, FunctionSpec{Name: f.RouterLease()}, o.Provision)...)
			// The router's consumer records its position, to resume there
			// if it is recreated.
			router := f
			router.Durable = f.RouterDurable()
			pub.add(positionSubjects(router, o.Provision)...)
		}
		if f.IsKeyed() {
			pub.add(keyedSubjects(f, o.Provision)...)
		} else if o.Provision && !f.IsDebounced() {
			pub.add(unkeyedSubjects(f)...)
		}
		if f.IsDebounced() {
			pub.add(debounceSubjects(f, o.Provision)...)
			// The debouncer's consumer records its position, as the
			// router's does.
			debouncer := f
			debouncer.Durable = f.DebouncerDurable()
			pub.add(positionSubjects(debouncer, o.Provision)...)
		}
		if o.Provision && f.IsKeyed() && !f.IsRouted() {
			// No consumer reads a token-keyed function's input; the server's
			// announcement of its deletion tells jetfn to recreate it.
			sub.add("$JS.EVENT.ADVISORY.STREAM.DELETED." + s)
		}
		if o.Provision {
			pub.add("$JS.API.CONSUMER.CREATE."+s+"."+d, "$JS.API.CONSUMER.CREATE."+s+"."+d+".>")
			// Turning debounce on or off is refused while the other mode's
			// consumer exists, which a deploy looks up.
			pub.add("$JS.API.CONSUMER.INFO."+s+"."+d, "$JS.API.CONSUMER.INFO."+s+"."+f.DebouncerDurable())
			pub.add(backfillSubjects(f)...)
			if f.IsDebounced() {
				// A widened filter gives the debouncer's consumer a backfill.
				debouncer := f
				debouncer.Durable = f.DebouncerDurable()
				pub.add(backfillSubjects(debouncer)...)
			}
			if f.IsKeyed() && f.IsRouted() {
				// A widened filter gives the router's consumer a backfill,
				// which a router taking over resets, as its own consumer.
				router := f
				router.Durable = f.RouterDurable()
				pub.add(backfillSubjects(router)...)
				for _, b := range BackfillConsumers(router.Durable) {
					pub.add("$JS.API.CONSUMER.RESET." + s + "." + b)
				}
			}
		}
		if o.Prune {
			pub.add("$JS.API.CONSUMER.DELETE." + s + "." + d)
			if f.IsDebounced() {
				pub.add("$JS.API.STREAM.DELETE."+f.DebounceStreamName(), "$JS.API.CONSUMER.DELETE."+s+"."+f.DebouncerDurable())
			}
			if f.IsKeyed() {
				pub.add("$JS.API.STREAM.DELETE." + f.KeyedStreamName())
				pub.add(keyedPruneSubjects(f)...)
				if f.IsRouted() {
					pub.add("$JS.API.CONSUMER.DELETE." + s + "." + f.RouterDurable())
				}
			}
		}
	}
	if len(m.Functions) > 0 {
		// A dead letter the stream acknowledges as a duplicate is read
		// back, to tell a crash's repeat from an ID that names another
		// message.
		dl := m.DeadLetter.Stream
		pub.add("$JS.API.STREAM.INFO."+dl, "$JS.API.STREAM.MSG.GET."+dl)
	}
	if o.Provision {
		for _, s := range m.Streams {
			pub.add("$JS.API.STREAM.CREATE."+s.Name, "$JS.API.STREAM.UPDATE."+s.Name, "$JS.API.STREAM.INFO."+s.Name)
		}
	}
	if o.Deployment != "" {
		pub.add(deploymentSubjects(o.Deployment)...)
	}
	pub.add(m.replySubjects(o)...)
	return Permissions{Publish: pub.list(), Subscribe: sub.list()}
}

// replySubjects are where the instance's micro services may answer: every
// requester's inbox prefix, and its own when a remote function makes it
// probe $SRV.INFO, because its own services answer that probe too.
func (m *Manifest) replySubjects(o PermissionOptions) []string {
	if len(m.Functions) == 0 {
		return nil // no service, nothing to answer
	}
	prefixes := o.ReplyPrefixes
	if len(prefixes) == 0 {
		prefixes = []string{DefaultInboxPrefix}
	}
	if len(m.RemoteSubjects()) > 0 {
		prefixes = append(slices.Clone(prefixes), cmp.Or(o.InboxPrefix, DefaultInboxPrefix))
	}
	out := make([]string, 0, len(prefixes))
	for _, p := range prefixes {
		out = append(out, p+".>")
	}
	return out
}

// BackfillConsumers are the two names a function's backfill consumer
// alternates between: after a change of its subject filter, it hands over
// what the main consumer passed over (runtime/filterchange.go).
func BackfillConsumers(durable string) [2]string {
	return [2]string{durable + "-backfill-a", durable + "-backfill-b"}
}

// backfillSubjects are what a filter change needs: pausing the main
// consumer for the change and resetting it to its ack floor, and creating,
// binding and deleting a backfill consumer; with a start time, a
// short-lived consumer finds the first sequence stored at it.
func backfillSubjects(f FunctionSpec) []string {
	s, d := f.Stream, f.Durable
	out := []string{"$JS.API.CONSUMER.RESET." + s + "." + d, "$JS.API.CONSUMER.PAUSE." + s + "." + d}
	for _, b := range BackfillConsumers(d) {
		out = append(out, "$JS.API.CONSUMER.CREATE."+s+"."+b, "$JS.API.CONSUMER.CREATE."+s+"."+b+".>",
			"$JS.API.CONSUMER.INFO."+s+"."+b, "$JS.API.CONSUMER.DELETE."+s+"."+b,
			"$JS.API.CONSUMER.MSG.NEXT."+s+"."+b, "$JS.ACK."+s+"."+b+".>")
	}
	if _, ok := f.StartTime(); ok {
		out = append(out, "$JS.API.CONSUMER.CREATE."+s+".*", "$JS.API.CONSUMER.DELETE."+s+".*")
	}
	return out
}

// attemptSubjects are what recording f's handler runs of redelivered
// messages needs: the bucket's info, reading a message's record (a direct
// get) and writing or purging it, all under keys <function>.<stream>.….
// Creating the bucket is positionSubjects' (one $JS.API.INFO) plus its own
// stream.
func attemptSubjects(f FunctionSpec) []string {
	stream, keys := "KV_"+AttemptsBucket, "$KV."+AttemptsBucket+"."+f.Name+"."+f.Stream+".>"
	return []string{"$JS.API.STREAM.INFO." + stream, keys, "$JS.API.DIRECT.GET." + stream + "." + keys}
}

// sharedKeySubjects are what the function's key in a bucket its instances
// share (a rate limit's schedule, a singleton's lease) needs: the bucket's
// info, a direct get and a compare-and-set put of the key, and with
// provisioning the bucket's creation (after $JS.API.INFO, which
// positionSubjects grants).
func sharedKeySubjects(bucket string, f FunctionSpec, provision bool) []string {
	stream, key := "KV_"+bucket, "$KV."+bucket+"."+f.Name
	out := []string{"$JS.API.STREAM.INFO." + stream, key, "$JS.API.DIRECT.GET." + stream + "." + key}
	if provision {
		out = append(out, "$JS.API.STREAM.CREATE."+stream)
	}
	return out
}

// positionSubjects are what recording f's consumer position needs (the
// bucket's info and a put on its three keys) and, with provisioning, what
// creating the consumer needs to resume from one: the bucket's creation
// and a direct get of each key it looks up (its own, its previous name's,
// its lineage's). The lineage key is named by the function's scope, the
// name it was first created under, which a rename chain can leave
// anywhere among the stream's functions: hence a wildcard over the
// stream's lineage keys.
func positionSubjects(f FunctionSpec, provision bool) []string {
	stream, keys := "KV_"+PositionsBucket, []string{"consumer." + f.Stream + "." + f.Durable, "function." + f.Stream + "." + f.Name,
		"scope." + f.Stream + ".*"}
	out := []string{"$JS.API.STREAM.INFO." + stream}
	for _, k := range keys {
		out = append(out, "$KV."+PositionsBucket+"."+k)
	}
	if !provision {
		return out
	}
	if f.RenamedFrom != "" {
		keys = append(keys, "function."+f.Stream+"."+f.RenamedFrom)
	}
	// Creating a bucket asks the account's JetStream info first.
	out = append(out, "$JS.API.STREAM.CREATE."+stream, "$JS.API.STREAM.CREATE.KV_"+AttemptsBucket, "$JS.API.INFO")
	for _, k := range keys {
		out = append(out, "$JS.API.DIRECT.GET."+stream+".$KV."+PositionsBucket+"."+k)
	}
	return out
}

// deploymentSubjects are the JetStream API calls of following one key of
// ManifestBucket: opening the bucket (stream info), reading the live
// revision (a direct get of the key's last message), and the watch, an
// ordered push consumer filtered on the key. The client names that
// consumer at random and deletes it when the watch stops or resets (the
// server would drop the ephemeral soon after its subscription goes), so
// delete is scoped to the bucket's stream, not to one consumer. The watch
// uses flow control: once about 1 MiB of revisions is delivered the server
// asks for a reply on $JS.FC.<stream>.<consumer>.<token> and delivers
// nothing more until it comes, so an instance without that right would
// stop seeing new revisions.
func deploymentSubjects(key string) []string {
	stream, subject := "KV_"+ManifestBucket, "$KV."+ManifestBucket+"."+key
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.DIRECT.GET." + stream + "." + subject,
		"$JS.API.CONSUMER.CREATE." + stream + ".*." + subject,
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.FC." + stream + ".*.*",
	}
}

// ServerConfig renders the permissions as a nats-server `permissions`
// block, ready to paste under a user.
func (p Permissions) ServerConfig() string {
	var b strings.Builder
	b.WriteString("permissions: {\n")
	fmt.Fprintf(&b, "  publish: { allow: %s }\n", quoteList(p.Publish))
	fmt.Fprintf(&b, "  subscribe: { allow: %s }\n", quoteList(p.Subscribe))
	b.WriteString("}\n")
	return b.String()
}

func quoteList(subjects []string) string {
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// subjectSet keeps subjects once, in the order first added.
type subjectSet struct {
	seen  map[string]bool
	order []string
}

func newSubjectSet() *subjectSet { return &subjectSet{seen: map[string]bool{}} }

func (s *subjectSet) add(subjects ...string) {
	for _, subj := range subjects {
		if !s.seen[subj] {
			s.seen[subj] = true
			s.order = append(s.order, subj)
		}
	}
}

func (s *subjectSet) list() []string { return slices.Clone(s.order) }

// StatusSubject is the subject of a function's status endpoint, the micro
// endpoint that carries its counters.
func StatusSubject(function string) string { return function + ".status" }

// RunsSubject is the subject of a function's runs endpoint, which answers
// with the instance's recent runs (runtime/runs.go). Every instance
// answers it, not one of a queue group, so a request gathers them all.
func RunsSubject(function string) string { return function + ".runs" }
