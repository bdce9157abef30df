package opscheck

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jetfn/jetfn/functions"
	"github.com/jetfn/jetfn/manifest"
)

// Names of the system under test. The remote function and its durable may
// be renamed by a deploy; the in-process one cannot (its name is its
// registry entry), and neither can its durable (fnRev.Durable).
const (
	remoteName      = "remote-greet"
	remoteRenamed   = "greeter-fn"
	recordingName   = "publish-recording-event"
	greetingsStream = "GREETINGS"
	recordingStream = "RECORDING"
	outStream       = "OUT"
	deadStream      = "DEADLETTER"
	deadPrefix      = "deadletter"
	deployment      = "opscheck"
	database        = "opscheck"
)

// Input subjects: two per function, so a filter can leave one out.
var (
	remoteSubjects    = []string{"greet.in.a", "greet.in.b"}
	recordingSubjects = []string{"recording.started", "recording.stopped"}
)

// Filter choices of each function; the first covers every input subject.
var (
	remoteFilters    = [][]string{{"greet.in.>"}, {"greet.in.a"}, {"greet.in.a", "greet.in.b"}, {"greet.in.b"}}
	recordingFilters = [][]string{{"recording.*"}, {"recording.started"}, {"recording.started", "recording.stopped"}}
)

// Consumer settings every revision shares: small, so the duplicate window
// that covers the redelivery horizon stays short and a replay of old
// messages shows as a second output within a short run.
const (
	maxDeliver = 3
	backoff    = 500 * time.Millisecond
	fnTimeout  = 2 * time.Second
	maxOutage  = 3 * time.Second
)

// ackWaits are the ackWait values a revision may choose.
var ackWaits = []time.Duration{2 * time.Second, 3 * time.Second}

// The recording function is keyed as the shipped manifests key it
// (manifests/local.yaml): by the payload's recordingId, through jetfn's
// router, in recordingPartitions partitions, in every revision. The
// partitions never change, since jetfn refuses a change while the keyed
// stream holds messages (a deploy the generator would see fail, not a
// revision it means). Its filter may change: for a field key the router
// reads the input through its own consumer (<durable>-router) with the
// function's filter, and the keyed stream's subjects
// (jetfn.keyed.<function>.<partition>.<subject>) and the partitions'
// filters do not depend on the function's subjects, so jetfn accepts it.
const (
	recordingKeyField   = "recordingId"
	recordingPartitions = 16
	// orderedKeying is how the recording function's messages of one key
	// are limited: one at a time, in order.
	orderedKeying = "ordered: true"
)

// fnRev is one function in a revision.
type fnRev struct {
	Present bool
	Name    string
	// Durable is empty for the function's name. Only the remote function's
	// is ever renamed: a keyed function's durable names its router's
	// consumer and its partitions' consumers, and new partition consumers
	// would overlap the old ones on the work-queue keyed stream, which the
	// server refuses; jetfn check refuses renamedFrom on a keyed function
	// for the same reason. Unkeying the recording function in the
	// revisions that rename it instead would switch it between an
	// unordered consumer and the partitions, and handle what is stored
	// again out of order (docs/ordering.md, "moving a function"): the order
	// check would have nothing left to check.
	Durable     string
	Filter      []string
	AckWait     time.Duration
	Concurrency int
}

// Revision is one manifest the generator deploys.
type Revision struct {
	Remote, Recording fnRev
	// Keying replaces the recording function's `ordered: true` when set
	// (Options.RecordingKeying): "keyConcurrency: 4" is the control that
	// shows the order check failing. Set by the system at deploy, never
	// by the generator.
	Keying string
}

// baseRevision covers every input subject under the original names; the
// run starts with it and the settle phase deploys it again.
func baseRevision() Revision {
	return Revision{
		Remote:    fnRev{Present: true, Name: remoteName, Filter: remoteFilters[0], AckWait: ackWaits[0], Concurrency: 4},
		Recording: fnRev{Present: true, Name: recordingName, Filter: recordingFilters[0], AckWait: ackWaits[0], Concurrency: 4},
	}
}

// durable is the consumer's name.
func (f fnRev) durable() string {
	if f.Durable != "" {
		return f.Durable
	}
	return f.Name
}

// String is a one-line summary for the history.
func (r Revision) String() string {
	keying := ""
	if r.Keying != "" {
		keying = " " + r.Keying
	}
	return fmt.Sprintf("remote{%s} recording{%s%s}", r.Remote.summary(), r.Recording.summary(), keying)
}

func (f fnRev) summary() string {
	if !f.Present {
		return "removed"
	}
	return fmt.Sprintf("name=%s durable=%s filter=%s ackWait=%s c=%d", f.Name, f.durable(),
		strings.Join(f.Filter, ","), f.AckWait, f.Concurrency)
}

// streams is the manifest's stream block: the same in every revision.
const streamsYAML = `deadLetter:
  stream: DEADLETTER
  subjectPrefix: deadletter
streams:
  - name: GREETINGS
    subjects: ["greet.in.>"]
    duplicates: %[1]s
    replicas: %[2]d
  - name: RECORDING
    subjects: ["recording.>"]
    duplicates: %[1]s
    replicas: %[2]d
  - name: OUT
    subjects: ["greet.done", "conversation.>"]
    duplicates: %[1]s
    replicas: %[2]d
  - name: DEADLETTER
    subjects: ["deadletter.>"]
    duplicates: 24h
    replicas: %[2]d
functions:
`

const functionYAML = `  - name: %s
    version: 1.0.0
    stream: %s
    subjects: [%s]
    durable: %s
    ackWait: %s
    maxDeliver: %d
    backoff: [%s]
    concurrency: %d
    timeout: %s
    maxOutage: %s
`

// YAML is the revision's manifest text, with window as the duplicate
// window of the input and output streams.
func (r Revision) YAML(window time.Duration, replicas int) []byte {
	var b strings.Builder
	b.WriteString("# Written by opscheck (test/opscheck): one revision of deployment opscheck.\n")
	fmt.Fprintf(&b, streamsYAML, window, replicas)
	if f := r.Remote; f.Present {
		writeFunction(&b, f, greetingsStream)
		// A rename says which function it was, as the README asks of an
		// operator: the consumer resumes the old one's position and keeps
		// its output scope.
		previous := remoteRenamed
		if f.Name == remoteRenamed {
			previous = remoteName
		}
		fmt.Fprintf(&b, "    renamedFrom: %s\n", previous)
		b.WriteString("    remote:\n      subject: greeter.handle\n    outputs:\n      - {subject: greet.done, stream: OUT}\n")
	}
	if f := r.Recording; f.Present {
		writeFunction(&b, f, recordingStream)
		keying := orderedKeying
		if r.Keying != "" {
			keying = r.Keying
		}
		fmt.Fprintf(&b, "    key: {field: %s}\n    %s\n    partitions: %d\n", recordingKeyField, keying, recordingPartitions)
		b.WriteString("    outputs:\n      - {subject: conversation.*.recording, stream: OUT}\n")
	}
	return []byte(b.String())
}

func writeFunction(b *strings.Builder, f fnRev, stream string) {
	quoted := make([]string, len(f.Filter))
	for i, s := range f.Filter {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	fmt.Fprintf(b, functionYAML, f.Name, stream, strings.Join(quoted, ", "), f.durable(), f.AckWait,
		maxDeliver, backoff, f.Concurrency, fnTimeout, maxOutage)
}

// check runs jetfn's own checks on the revision (as `jetfn check` does):
// the generator deploys only valid revisions.
func (r Revision) check(window time.Duration, replicas int, allowShort bool) (*manifest.Manifest, error) {
	m, rep := manifest.Inspect("", r.YAML(window, replicas), functions.All())
	problems := rep.Problems
	if !allowShort {
		problems = append(problems, rep.ShortWindows...)
	}
	var errs []error
	for _, p := range problems {
		errs = append(errs, p)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("revision %s: %w", r, errors.Join(errs...))
	}
	return m, nil
}

// minWindow is the smallest duplicate window every revision passes `jetfn
// check` with (twice the longest redelivery horizon): the outputs'
// window, so a message handled again later than that stores a second
// output.
func minWindow() time.Duration {
	var w time.Duration
	for _, aw := range ackWaits {
		r := baseRevision()
		r.Remote.AckWait, r.Recording.AckWait = aw, aw
		m, _ := manifest.Inspect("", r.YAML(time.Hour, 1), functions.All())
		for _, h := range m.Horizons() {
			w = max(w, h.MinWindow())
		}
	}
	return w.Round(time.Second) + time.Second
}

// covers reports whether the revision's filters cover subject.
func (f fnRev) covers(subject string) bool {
	return f.Present && slices.ContainsFunc(f.Filter, func(p string) bool { return manifest.SubjectCovered(subject, p) })
}
