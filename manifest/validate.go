package manifest

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// semVer is the pattern from semver.org; NATS micro refuses other versions.
var semVer = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// natsName is what JetStream accepts for stream and durable names, and what
// NATS micro accepts for service names.
var natsName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate checks the manifest against itself and against the functions
// compiled into this binary. It reports every problem at once, each naming
// the field, so one run of `jetfn check` shows everything to fix.
func (m *Manifest) Validate(known []string) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	m.validateStreams(add)
	m.validateDeadLetter(add)
	m.validateFunctions(known, add)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n%w", ErrInvalidManifest, errors.Join(errs...))
}

type problemFunc func(format string, args ...any)

func (m *Manifest) validateStreams(add problemFunc) {
	if len(m.Streams) == 0 {
		add("streams: at least one stream is required")
	}
	seen := map[string]bool{}
	for i, s := range m.Streams {
		at := fmt.Sprintf("streams[%d] (%s)", i, s.Name)
		switch {
		case s.Name == "":
			add("streams[%d].name: required", i)
		case !natsName.MatchString(s.Name):
			add("%s.name: %q may hold only letters, digits, - and _", at, s.Name)
		case seen[s.Name]:
			add("%s.name: declared twice", at)
		}
		seen[s.Name] = true
		if len(s.Subjects) == 0 {
			add("%s.subjects: at least one subject is required", at)
		}
		for _, subj := range s.Subjects {
			if err := checkSubject(subj); err != nil {
				add("%s.subjects: %v", at, err)
			}
		}
		if s.Storage != "file" && s.Storage != "memory" {
			add("%s.storage: %q is not file or memory", at, s.Storage)
		}
		if s.Replicas < 1 || s.Replicas > 5 {
			add("%s.replicas: %d is not between 1 and 5", at, s.Replicas)
		}
		if s.Duplicates < 0 || s.MaxAge < 0 {
			add("%s: duplicates and maxAge must not be negative", at)
		}
		if s.MaxAge > 0 && s.Duplicates > s.MaxAge {
			add("%s.duplicates: %s is longer than maxAge %s: a message expires before its ID's window ends, "+
				"and a restarted server forgets the ID with it", at, s.Duplicates, s.MaxAge)
		}
		if !slices.Contains([]string{"", "limits", "interest", "workqueue"}, s.Retention) {
			add("%s.retention: %q is not limits, interest or workqueue", at, s.Retention)
		}
		if s.MaxMsgs < 0 || s.MaxBytes < 0 {
			add("%s: maxMsgs and maxBytes must not be negative (0 is unlimited)", at)
		}
	}
	m.validateStreamOverlap(add)
}

// validateStreamOverlap refuses two streams that would both claim a
// subject; the server refuses them too, but only at start-up.
func (m *Manifest) validateStreamOverlap(add problemFunc) {
	for i, a := range m.Streams {
		for _, b := range m.Streams[i+1:] {
			for _, sa := range a.Subjects {
				for _, sb := range b.Subjects {
					if SubjectsOverlap(sa, sb) {
						add("streams (%s, %s): subjects %s and %s overlap; a message would belong to both", a.Name, b.Name, sa, sb)
					}
				}
			}
		}
	}
}

func (m *Manifest) validateDeadLetter(add problemFunc) {
	dl, ok := m.Stream(m.DeadLetter.Stream)
	if !ok {
		add("deadLetter.stream: %s is not declared under streams", m.DeadLetter.Stream)
		return
	}
	if err := checkSubject(m.DeadLetter.SubjectPrefix + ".x"); err != nil {
		add("deadLetter.subjectPrefix: %v", err)
		return
	}
	for _, f := range m.Functions {
		subj := m.DeadLetterSubject(f.Name)
		if !CoveredByAny(subj, dl.Subjects) {
			add("deadLetter: subject %s of function %s is not stored by stream %s (subjects %v)",
				subj, f.Name, dl.Name, dl.Subjects)
		}
	}
}

func (m *Manifest) validateFunctions(known []string, add problemFunc) {
	if len(m.Functions) == 0 {
		add("functions: at least one function is required")
	}
	names, durables := map[string]bool{}, map[string]string{}
	for i := range m.Functions {
		f := &m.Functions[i]
		at := fmt.Sprintf("functions[%d] (%s)", i, f.Name)
		switch {
		case f.Name == "":
			add("functions[%d].name: required", i)
		case !slices.Contains(known, f.Name):
			add("%s.name: unknown function %q; this binary has: %s", at, f.Name, strings.Join(known, ", "))
		case names[f.Name]:
			add("%s.name: declared twice", at)
		}
		names[f.Name] = true
		if other, dup := durables[f.Durable]; dup {
			add("%s.durable: %q is also the durable of %s", at, f.Durable, other)
		}
		durables[f.Durable] = f.Name
		m.validateFunction(at, f, add)
	}
}

func (m *Manifest) validateFunction(at string, f *FunctionSpec, add problemFunc) {
	if !semVer.MatchString(f.Version) {
		add("%s.version: %q is not a SemVer version such as 1.0.0", at, f.Version)
	}
	if !natsName.MatchString(f.Durable) {
		add("%s.durable: %q may hold only letters, digits, - and _", at, f.Durable)
	}
	m.validateSubjects(at, f, add)
	if f.AckWait <= 0 {
		add("%s.ackWait: must be positive", at)
	}
	if f.Heartbeat <= 0 || f.Heartbeat > f.AckWait/2 {
		add("%s.heartbeat: %s must be positive and at most half of ackWait %s (%s): the server redelivers "+
			"a message whose timer reaches ackWait, and a heartbeat must land with room to spare for a busy process",
			at, f.Heartbeat, f.AckWait, f.AckWait/2)
	}
	if f.MaxDeliver < 1 {
		add("%s.maxDeliver: %d must be at least 1", at, f.MaxDeliver)
	}
	if len(f.Backoff) > f.MaxDeliver {
		add("%s.backoff: %d entries but maxDeliver is %d", at, len(f.Backoff), f.MaxDeliver)
	}
	for _, d := range f.Backoff {
		if d <= 0 {
			add("%s.backoff: entry %s must be positive", at, d)
		}
	}
	if f.Concurrency < 1 {
		add("%s.concurrency: %d must be at least 1", at, f.Concurrency)
	}
	if f.MaxPayload < 1 {
		add("%s.maxPayload: %d must be at least 1 byte", at, f.MaxPayload)
	}
	if f.Prefetch != nil && *f.Prefetch < 0 {
		add("%s.prefetch: %d must not be negative", at, *f.Prefetch)
	}
	if f.MaxAckPending < f.Concurrency {
		add("%s.maxAckPending: %d is below concurrency %d", at, f.MaxAckPending, f.Concurrency)
	}
	if f.Timeout <= 0 {
		add("%s.timeout: must be positive (default %s)", at, DefaultTimeout)
	}
	if f.MaxOutage < 0 {
		add("%s.maxOutage: must not be negative", at)
	}
	m.validateOutputs(at, f, add)
}

// validateOutputs checks that every output is stored by its stream and
// that no output feeds the function's own input, which would loop.
func (m *Manifest) validateOutputs(at string, f *FunctionSpec, add problemFunc) {
	for i, o := range f.Outputs {
		oat := fmt.Sprintf("%s.outputs[%d]", at, i)
		if err := checkSubject(o.Subject); err != nil {
			add("%s.subject: %v", oat, err)
			continue
		}
		stream, ok := m.Stream(o.Stream)
		switch {
		case !ok:
			add("%s.stream: %q is not declared under streams", oat, o.Stream)
		case !CoveredByAny(o.Subject, stream.Subjects):
			add("%s: subject %s is not stored by stream %s (subjects %v); the publish would fail", oat, o.Subject, o.Stream, stream.Subjects)
		case stream.Retention == "interest" || stream.Retention == "workqueue":
			add("%s: stream %s has retention %s, which deletes a message once consumed; the server keeps its "+
				"message ID only while it is stored, so after a restart a redelivery's repeated output would be "+
				"stored again inside the duplicate window. Output streams need retention limits", oat, o.Stream, stream.Retention)
		}
		for _, in := range f.FilterSubjects() {
			if SubjectsOverlap(o.Subject, in) {
				add("%s: subject %s overlaps the function's own input %s; its output would feed itself", oat, o.Subject, in)
			}
		}
	}
}

func (m *Manifest) validateSubjects(at string, f *FunctionSpec, add problemFunc) {
	stream, ok := m.Stream(f.Stream)
	if !ok {
		add("%s.stream: %q is not declared under streams", at, f.Stream)
	}
	subjects := f.FilterSubjects()
	switch {
	case len(subjects) == 0:
		add("%s.subject: a subject (or subjects) is required", at)
	case f.Subject != "" && len(f.Subjects) > 0:
		add("%s.subjects: give subject or subjects, not both", at)
	}
	for _, subj := range subjects {
		if err := checkSubject(subj); err != nil {
			add("%s.subject: %v", at, err)
		} else if ok && !CoveredByAny(subj, stream.Subjects) {
			add("%s.subject: %s is not covered by stream %s's subjects %v", at, subj, stream.Name, stream.Subjects)
		}
	}
}

// checkSubject rejects subjects that NATS would refuse or misread.
func checkSubject(subj string) error {
	if subj == "" {
		return errors.New("empty subject")
	}
	tokens := strings.Split(subj, ".")
	for i, t := range tokens {
		if t == "" || strings.ContainsAny(t, " \t\r\n") {
			return fmt.Errorf("subject %q has an empty token or whitespace", subj)
		}
		if t == ">" && i != len(tokens)-1 {
			return fmt.Errorf("subject %q has > before its last token", subj)
		}
	}
	return nil
}

// CoveredByAny reports whether some pattern covers subj (SubjectCovered).
func CoveredByAny(subj string, patterns []string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return SubjectCovered(subj, p) })
}

// SubjectCovered reports whether every subject matched by subj (which may
// hold wildcards) is also matched by pattern.
func SubjectCovered(subj, pattern string) bool {
	s, p := strings.Split(subj, "."), strings.Split(pattern, ".")
	for i, pt := range p {
		if pt == ">" {
			return len(s) > i
		}
		if i >= len(s) {
			return false
		}
		switch st := s[i]; {
		case pt == "*":
			if st == ">" {
				return false
			}
		case st != pt:
			return false
		}
	}
	return len(s) == len(p)
}

// SubjectsOverlap reports whether some subject matches both patterns.
func SubjectsOverlap(a, b string) bool {
	ta, tb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(ta) && i < len(tb); i++ {
		x, y := ta[i], tb[i]
		if x == ">" || y == ">" {
			return true
		}
		if x != "*" && y != "*" && x != y {
			return false
		}
	}
	return len(ta) == len(tb)
}
