package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/jetfn/jetfn"
	"github.com/jetfn/jetfn/internal/yamldecode"
	"go.yaml.in/yaml/v3"
)

// Manifest is the deployable description of a runtime: the streams it keeps
// and the functions it binds. Everything a deployer may change without a
// rebuild lives here.
type Manifest struct {
	DeadLetter DeadLetterSpec `yaml:"deadLetter"`
	Streams    []StreamSpec   `yaml:"streams"`
	Functions  []FunctionSpec `yaml:"functions"`
	// AllowShortWindow accepts duplicate windows shorter than twice the
	// redelivery horizon, as --allow-short-window does, for every instance
	// that runs this manifest: a deployment's revision is applied by
	// instances each with its own flags, and one started without the flag
	// would refuse it.
	AllowShortWindow bool `yaml:"allowShortWindow"`

	// Digest identifies the manifest's bytes; it is published in every
	// function's micro metadata so operators can tell which revision runs.
	Digest string `yaml:"-"`

	// file and root place problems: the file the manifest was read from
	// (empty for bytes from elsewhere) and its parsed YAML tree, whose
	// lines are the file's. A Manifest built in Go has neither.
	file string
	root *yaml.Node
}

// DeadLetterSpec says where poison messages go: to SubjectPrefix.<function>
// on Stream, which must be declared under streams.
type DeadLetterSpec struct {
	Stream        string `yaml:"stream"`
	SubjectPrefix string `yaml:"subjectPrefix"`
}

// StreamSpec declares one JetStream stream.
type StreamSpec struct {
	Name     string   `yaml:"name"`
	Subjects []string `yaml:"subjects"`
	// Duplicates is the duplicate window: how long the stream remembers
	// Nats-Msg-Id values. It must outlast any outage after which a function
	// may publish the same output again (default 24h).
	Duplicates time.Duration `yaml:"duplicates"`
	Storage    string        `yaml:"storage"`
	Replicas   int           `yaml:"replicas"`
	MaxAge     time.Duration `yaml:"maxAge"`
	// Retention is limits, interest or workqueue. Absent, a new stream
	// gets limits and an existing one keeps its own. An output stream must
	// keep limits (validateOutputs).
	Retention string `yaml:"retention"`
	// MaxMsgs and MaxBytes bound the stream; the oldest messages are
	// discarded past them. 0 (absent) leaves them to the server: unlimited
	// for a new stream, an administrator's value for an existing one.
	MaxMsgs  int64 `yaml:"maxMsgs"`
	MaxBytes int64 `yaml:"maxBytes"`
	// Source, set only by jetfn for a keyed stream (keyed.go), copies
	// another stream's messages into this one.
	Source *SourceSpec `yaml:"-"`
	// AllowSchedules, set by jetfn when a scheduled function reads the
	// stream (schedule.go), lets the server keep message schedules in it.
	AllowSchedules bool `yaml:"-"`
	// AllowAtomic, set by jetfn when a function's delayed output is stored
	// in the stream, lets the server take atomic batches (delayed.go).
	AllowAtomic bool `yaml:"-"`
	// AllowTTL, set by jetfn on a debounce stream (debounce.go), lets
	// messages carry a time to live of their own.
	AllowTTL bool `yaml:"-"`
}

// FunctionSpec binds one function to a durable pull consumer: a compiled-in
// one named by Name, or, with Remote, a NATS micro endpoint that handles
// each delivery as a request.
type FunctionSpec struct {
	Name     string   `yaml:"name"`
	Version  string   `yaml:"version"`
	Stream   string   `yaml:"stream"`
	Subject  string   `yaml:"subject"`
	Subjects []string `yaml:"subjects"`
	Durable  string   `yaml:"durable"`
	// AckWait is how long the server waits for an ack (or a heartbeat)
	// before it redelivers.
	AckWait    time.Duration `yaml:"ackWait"`
	MaxDeliver int           `yaml:"maxDeliver"`
	// Heartbeat is how often a held message, running or buffered, gets
	// InProgress; at most AckWait/2 (default AckWait/3).
	Heartbeat time.Duration `yaml:"heartbeat"`
	// Backoff is the redelivery delay after the n-th failed attempt; the
	// last entry repeats. Empty means a failed message comes back after
	// AckWait.
	Backoff []time.Duration `yaml:"backoff"`
	// MaxRetryAfter bounds the delay a handler's RetryAfter or a remote's
	// Retry-After may ask for; a longer one is clamped to it. 0 (absent)
	// is the default, RetryAfterBound. The duplicate-window horizon counts
	// it for every delivery, so no requested delay can outlive the window.
	MaxRetryAfter time.Duration `yaml:"maxRetryAfter"`
	Concurrency   int           `yaml:"concurrency"`
	// Prefetch is how many pulled messages may wait for a free worker.
	// Absent, the runtime derives it from the measured handling rate (at
	// most DefaultMaxPrefetch); 0 pulls only for free workers.
	Prefetch *int `yaml:"prefetch"`
	// PriorityHeader names a header: a message carrying it (with any value
	// but empty) is handed to a worker before every message without it
	// that waits in the buffer. Messages already running are not
	// interrupted, and nothing waits on the server for it.
	PriorityHeader string `yaml:"priorityHeader"`
	// RateLimit is the most messages the function handles per period, all
	// its instances together ("100/s"): jetfn pulls no faster, so a
	// message waits on the server, where its ack wait does not run.
	RateLimit *Rate `yaml:"rateLimit"`
	// Singleton makes one instance at a time pull the function's messages;
	// the others stand by, and one takes over within a second when the
	// active one drains, within 5 seconds when it dies.
	Singleton bool `yaml:"singleton"`
	// Key says where each message's key is (keyed.go); Ordered handles
	// the messages of one key one at a time in stream order, across every
	// instance, and KeyConcurrency lets at most that many of one key run
	// at once instead. Partitions is how many partitions the keys are
	// hashed to (default concurrency): keys of one partition share its
	// order.
	Key            *KeySpec `yaml:"key"`
	Ordered        bool     `yaml:"ordered"`
	KeyConcurrency int      `yaml:"keyConcurrency"`
	Partitions     int      `yaml:"partitions"`
	// Schedule triggers the function by the clock (schedule.go): the
	// server stores a tick on its subject at each time.
	Schedule *ScheduleSpec `yaml:"schedule"`
	// Debounce runs the function once per burst of a key's messages (key:),
	// with the last, once the key has been quiet this long (debounce.go).
	Debounce time.Duration `yaml:"debounce"`
	// KeyRateLimit is the most messages of one key a keyed function
	// handles per period, all its instances together: a message of a key
	// whose turn has not come goes back to the server until it has, and
	// holds its partition meanwhile.
	KeyRateLimit  *Rate `yaml:"keyRateLimit"`
	MaxAckPending int   `yaml:"maxAckPending"`
	// MaxPayload is the largest payload in bytes the function accepts
	// (default 1 MiB); a larger one is dead-lettered without being decoded.
	MaxPayload int `yaml:"maxPayload"`
	// Timeout is a handler run's hard budget (default DefaultTimeout): its
	// context is cancelled then, and a handler still running a tick later
	// is abandoned: the message is settled as a failed attempt (retried
	// with backoff, dead-lettered on the last), its worker is replaced,
	// and the run counts as abandoned.
	Timeout time.Duration `yaml:"timeout"`
	// Outputs are the subjects the function publishes to and the streams
	// that store them. The runtime's publisher refuses any other subject,
	// so the manifest is the truth about who writes where.
	Outputs []OutputSpec `yaml:"outputs"`
	// MaxOutage is how long all of the function's instances may be down at
	// once (default 1h); it feeds the duplicate-window check.
	MaxOutage time.Duration `yaml:"maxOutage"`
	// Start is where the function's durable consumer starts when jetfn
	// creates it and knows no earlier position of it: "all" (every stored
	// message, the default), "new" (only messages stored from then on) or
	// an RFC 3339 time (messages stored from that time). A consumer jetfn
	// recorded before (jetfn-positions) resumes after its recorded ack
	// floor instead, whatever Start says.
	Start string `yaml:"start"`
	// RenamedFrom names the function this one was called before a rename:
	// its recorded position is where this one's new consumer resumes.
	RenamedFrom string `yaml:"renamedFrom"`
	// Monitor sets the thresholds `nats server check consumer` reads from
	// the consumer's io.nats.monitor.* metadata.
	Monitor *MonitorSpec `yaml:"monitor"`
	Config  jetfn.Config `yaml:"config"`
	// Remote makes the function a remote one: each delivery is sent as a
	// request to a NATS micro endpoint, whose reply settles it. Its name is
	// not looked up in the compiled-in registry, and it takes no config.
	Remote *RemoteSpec `yaml:"remote"`
}

// RemoteSpec names the NATS micro endpoint a remote function's deliveries
// are sent to, in any language (the wire contract is in docs/remote.md).
type RemoteSpec struct {
	// Subject is the endpoint's subject: a literal subject, no wildcards.
	Subject string `yaml:"subject"`
}

// IsRemote reports whether the function is handled by a remote endpoint.
func (f *FunctionSpec) IsRemote() bool { return f.Remote != nil }

// MonitorSpec holds consumer health thresholds; zero leaves a check off.
type MonitorSpec struct {
	AckPendingCritical   int           `yaml:"ackPendingCritical"`
	PendingCritical      int           `yaml:"pendingCritical"`
	RedeliveryCritical   int           `yaml:"redeliveryCritical"`
	LastAckCritical      time.Duration `yaml:"lastAckCritical"`
	LastDeliveryCritical time.Duration `yaml:"lastDeliveryCritical"`
}

// OutputSpec is one subject (pattern) a function publishes to.
type OutputSpec struct {
	Subject string `yaml:"subject"`
	Stream  string `yaml:"stream"`
	// Delayed lets the function publish this output to happen later
	// (Publisher.PublishAt): its stream then also stores the waiting
	// outputs, under DelaySubjectInfix (delayed.go).
	Delayed bool `yaml:"delayed"`
}

// Manifest defaults, applied to fields a manifest leaves out.
const (
	DefaultDuplicates    = 24 * time.Hour
	DefaultAckWait       = 30 * time.Second
	DefaultMaxDeliver    = 5
	DefaultMaxAckPending = 1000
	DefaultDeadLetter    = "DEADLETTER"
	DefaultDeadPrefix    = "deadletter"
	DefaultMaxOutage     = time.Hour
	DefaultTimeout       = 5 * time.Minute
	// DefaultMaxPayload is the largest payload a function accepts unless its
	// manifest entry says otherwise.
	DefaultMaxPayload = 1 << 20
)

// Load reads and parses the manifest at path; every problem it reports
// names the file and the line. It does not validate it against a registry;
// call Validate for that, or Inspect for every check at once.
func Load(path string) (*Manifest, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	return parseStrict(path, raw)
}

// Parse decodes a manifest strictly and fills in defaults. Every unknown or
// repeated key and every value of the wrong kind is reported at once
// (ErrInvalidManifest), each with its line: "line 16:
// functions[0] (summarize-session).concurency: unknown key; did you mean
// concurrency?".
func Parse(raw []byte) (*Manifest, error) {
	return parseStrict("", raw)
}

func parseStrict(file string, raw []byte) (*Manifest, error) {
	m, problems := decodeManifest(file, raw)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w:\n%w", ErrInvalidManifest, errors.Join(problems...))
	}
	return m, nil
}

// decodeManifest decodes as much of raw as it can and lists every problem
// on the way; the manifest is nil only when raw is not YAML at all. The
// manifest keeps its tree, so later checks can name lines too.
func decodeManifest(file string, raw []byte) (*Manifest, []error) {
	m := &Manifest{file: file}
	root, err := parseYAML(raw)
	if err != nil {
		return nil, []error{m.problemAt(place{}, syntaxErrorLine(raw), withHint(err))}
	}
	var problems []error
	if root != nil {
		m.root = root
		for _, p := range yamldecode.Decode(root, reflect.ValueOf(m).Elem()) {
			problems = append(problems, m.problemAt(p.Place, p.Line, p.Err))
		}
	}
	sum := sha256.Sum256(raw)
	m.Digest = hex.EncodeToString(sum[:6])
	m.applyDefaults()
	return m, problems
}

// errNotYAML is the manifest's text failing to parse as YAML at all; every
// other problem waits until it parses.
var errNotYAML = errors.New("not valid YAML")

// parseYAML is the document's top node; nil for an empty document.
func parseYAML(raw []byte) (*yaml.Node, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %s", errNotYAML, strings.TrimPrefix(yamlLine.ReplaceAllString(err.Error(), ""), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// yamlLine is the "line N: " yaml.v3 puts in its syntax errors. It is
// often not the line at fault: yaml.v3 names where the enclosing block
// began, so a bad indent on line 4 reads "line 1"; syntaxErrorLine finds
// the real one.
var yamlLine = regexp.MustCompile(`line \d+: `)

// syntaxErrorLine is the first line at which raw stops being YAML: the
// length of the shortest prefix of whole lines that does not parse.
func syntaxErrorLine(raw []byte) int {
	lines := bytes.SplitAfter(raw, []byte("\n"))
	for n := 1; n <= len(lines); n++ {
		if _, perr := parseYAML(bytes.Join(lines[:n], nil)); perr != nil {
			return n
		}
	}
	return 0 // every prefix parses: only the whole fails, and yaml.v3 says why
}

// withHint adds what usually causes yaml.v3's terser syntax errors.
func withHint(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "tab character"):
		return fmt.Errorf("%w (YAML indents with spaces only)", err)
	case strings.Contains(msg, "cannot start any token"):
		return fmt.Errorf("%w (a tab? YAML indents with spaces only)", err)
	case strings.Contains(msg, "did not find expected key"), strings.Contains(msg, "did not find expected '-' indicator"),
		strings.Contains(msg, "mapping values are not allowed"):
		return fmt.Errorf("%w (check this line's indentation against the lines above)", err)
	}
	return err
}

func (m *Manifest) applyDefaults() {
	orDefault(&m.DeadLetter.Stream, DefaultDeadLetter)
	orDefault(&m.DeadLetter.SubjectPrefix, DefaultDeadPrefix)
	for i := range m.Streams {
		m.Streams[i].applyDefaults()
	}
	for i := range m.Functions {
		f := &m.Functions[i]
		f.applyDefaults()
		for _, o := range f.Outputs {
			if o.Delayed {
				m.allowDelays(o.Stream)
			}
		}
		if f.Schedule == nil {
			continue
		}
		orDefault(&f.Schedule.Missed, MissedOnce)
		for j := range m.Streams {
			if m.Streams[j].Name == f.Stream {
				m.Streams[j].AllowSchedules = true
			}
		}
	}
}

// allowDelays lets stream hold delayed outputs: the server's message
// schedules, published in atomic batches (delayed.go).
func (m *Manifest) allowDelays(stream string) {
	for j := range m.Streams {
		if m.Streams[j].Name == stream {
			m.Streams[j].AllowSchedules, m.Streams[j].AllowAtomic = true, true
		}
	}
}

func (s *StreamSpec) applyDefaults() {
	orDefault(&s.Duplicates, DefaultDuplicates)
	orDefault(&s.Storage, "file")
	orDefault(&s.Replicas, 1)
}

func (f *FunctionSpec) applyDefaults() {
	orDefault(&f.Durable, f.Name)
	orDefault(&f.Start, StartAll)
	orDefault(&f.AckWait, DefaultAckWait)
	orDefault(&f.MaxDeliver, DefaultMaxDeliver)
	orDefault(&f.Heartbeat, f.AckWait/3)
	orDefault(&f.Concurrency, 1)
	orDefault(&f.MaxPayload, DefaultMaxPayload)
	orDefault(&f.MaxOutage, DefaultMaxOutage)
	orDefault(&f.Timeout, DefaultTimeout)
	orDefault(&f.MaxAckPending, max(DefaultMaxAckPending, f.Concurrency))
	if f.IsKeyed() || f.IsDebounced() {
		orDefault(&f.Partitions, f.Concurrency)
	}
}

// orDefault sets a key the manifest left out (its zero value) to def.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Values of FunctionSpec.Start besides an RFC 3339 time.
const (
	StartAll = "all"
	StartNew = "new"
)

// StartTime is the time of a Start that names one.
func (f *FunctionSpec) StartTime() (time.Time, bool) {
	if f.Start == "" || f.Start == StartAll || f.Start == StartNew {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, f.Start)
	return t, err == nil
}

// FilterSubjects is the function's subject list, whichever key declared it.
func (f *FunctionSpec) FilterSubjects() []string {
	if f.Subject != "" {
		return append([]string{f.Subject}, f.Subjects...)
	}
	return f.Subjects
}

// OutputSubjects lists the subjects the function may publish to.
func (f *FunctionSpec) OutputSubjects() []string {
	subjects := make([]string, 0, len(f.Outputs))
	for _, o := range f.Outputs {
		subjects = append(subjects, o.Subject)
	}
	return subjects
}

// DelayedOutputSubjects are the subjects (patterns) of f's outputs
// declared delayed.
func (f *FunctionSpec) DelayedOutputSubjects() []string {
	var subjects []string
	for _, o := range f.Outputs {
		if o.Delayed {
			subjects = append(subjects, o.Subject)
		}
	}
	return subjects
}

// Stream returns the declared stream with that name.
func (m *Manifest) Stream(name string) (StreamSpec, bool) {
	for _, s := range m.Streams {
		if s.Name == name {
			return s, true
		}
	}
	return StreamSpec{}, false
}

// DeadLetterSubject is where a function's poison messages are republished.
func (m *Manifest) DeadLetterSubject(function string) string {
	return m.DeadLetter.SubjectPrefix + "." + function
}
