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

// headerName is an HTTP header field name (RFC 9110 token), which NATS
// headers follow.
var headerName = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")

// Validate checks the manifest against itself and against the functions
// compiled into this binary. It reports every problem at once, each a
// *Problem naming the field and, for a parsed manifest, its line, so one run
// of `jetfn check` shows everything to fix.
func (m *Manifest) Validate(known []string) error {
	errs := m.validate(known)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n%w", ErrInvalidManifest, errors.Join(errs...))
}

func (m *Manifest) validate(known []string) []error {
	var errs []error
	add := func(p place, format string, args ...any) {
		errs = append(errs, m.problem(p, fmt.Errorf(format, args...)))
	}
	m.validateStreams(add)
	m.validateDeadLetter(add)
	m.validateFunctions(known, add)
	return errs
}

type problemFunc func(p place, format string, args ...any)

func (m *Manifest) validateStreams(add problemFunc) {
	if len(m.Streams) == 0 {
		add(at("streams"), "at least one stream is required")
	}
	seen := map[string]bool{}
	for i, s := range m.Streams {
		sat := at("streams").Index(i, s.Name)
		switch {
		case s.Name == "":
			add(sat.Key("name"), "required")
		case !natsName.MatchString(s.Name):
			add(sat.Key("name"), "%q may hold only letters, digits, - and _", s.Name)
		case seen[s.Name]:
			add(sat.Key("name"), "declared twice")
		}
		seen[s.Name] = true
		if len(s.Subjects) == 0 {
			add(sat.Key("subjects"), "at least one subject is required")
		}
		for _, subj := range s.Subjects {
			if err := checkSubject(subj); err != nil {
				add(sat.Key("subjects"), "%v", err)
			}
		}
		if s.Storage != "file" && s.Storage != "memory" {
			add(sat.Key("storage"), "%q is not file or memory", s.Storage)
		}
		if s.Replicas < 1 || s.Replicas > 5 {
			add(sat.Key("replicas"), "%d is not between 1 and 5", s.Replicas)
		}
		if s.Duplicates < 0 || s.MaxAge < 0 {
			add(sat, "duplicates and maxAge must not be negative")
		}
		if s.MaxAge > 0 && s.Duplicates > s.MaxAge {
			add(sat.Key("duplicates"), "%s is longer than maxAge %s: a message expires before its ID's window ends, "+
				"and a restarted server forgets the ID with it", s.Duplicates, s.MaxAge)
		}
		if !slices.Contains([]string{"", "limits", "interest", "workqueue"}, s.Retention) {
			add(sat.Key("retention"), "%q is not limits, interest or workqueue", s.Retention)
		}
		if s.MaxMsgs < 0 || s.MaxBytes < 0 {
			add(sat, "maxMsgs and maxBytes must not be negative (0 is unlimited)")
		}
	}
	m.validateStreamOverlap(add)
}

// validateStreamOverlap refuses two streams that would both claim a
// subject; the server refuses them too, but only at start-up.
func (m *Manifest) validateStreamOverlap(add problemFunc) {
	for i, a := range m.Streams {
		for j := i + 1; j < len(m.Streams); j++ {
			b := m.Streams[j]
			bat := at("streams").Index(j, b.Name).Key("subjects").Labelled(fmt.Sprintf("streams (%s, %s)", a.Name, b.Name))
			for _, sa := range a.Subjects {
				for _, sb := range b.Subjects {
					if SubjectsOverlap(sa, sb) {
						add(bat, "subjects %s and %s overlap; a message would belong to both", sa, sb)
					}
				}
			}
		}
	}
}

func (m *Manifest) validateDeadLetter(add problemFunc) {
	dl, ok := m.Stream(m.DeadLetter.Stream)
	if !ok {
		add(at("deadLetter").Key("stream"), "%s is not declared under streams", m.DeadLetter.Stream)
		return
	}
	if err := checkSubject(m.DeadLetter.SubjectPrefix + ".x"); err != nil {
		add(at("deadLetter").Key("subjectPrefix"), "%v", err)
		return
	}
	for i, f := range m.Functions {
		subj := m.DeadLetterSubject(f.Name)
		if !CoveredByAny(subj, dl.Subjects) {
			add(at("functions").Index(i, f.Name).Labelled("deadLetter"), "subject %s of function %s is not stored by stream %s (subjects %v)",
				subj, f.Name, dl.Name, dl.Subjects)
		}
	}
}

func (m *Manifest) validateFunctions(known []string, add problemFunc) {
	if len(m.Functions) == 0 {
		add(at("functions"), "at least one function is required")
	}
	names, durables := map[string]bool{}, map[string]string{}
	for i := range m.Functions {
		f := &m.Functions[i]
		fat := at("functions").Index(i, f.Name)
		switch {
		case f.Name == "":
			add(fat.Key("name"), "required")
		case !f.IsRemote() && !slices.Contains(known, f.Name):
			add(fat.Key("name"), "unknown function %q; this binary has: %s", f.Name, strings.Join(known, ", "))
		case names[f.Name]:
			add(fat.Key("name"), "declared twice")
		}
		names[f.Name] = true
		if other, dup := durables[f.Durable]; dup {
			add(fat.Key("durable"), "%q is also the durable of %s", f.Durable, other)
		}
		durables[f.Durable] = f.Name
		m.validateFunction(fat, f, add)
	}
}

func (m *Manifest) validateFunction(fat place, f *FunctionSpec, add problemFunc) {
	if !semVer.MatchString(f.Version) {
		add(fat.Key("version"), "%q is not a SemVer version such as 1.0.0", f.Version)
	}
	if !natsName.MatchString(f.Durable) {
		add(fat.Key("durable"), "%q may hold only letters, digits, - and _", f.Durable)
	}
	m.validateSubjects(fat, f, add)
	m.validateSchedule(fat, f, add)
	m.validateInputRetention(f, add)
	if f.AckWait <= 0 {
		add(fat.Key("ackWait"), "must be positive")
	}
	if f.Heartbeat <= 0 || f.Heartbeat > f.AckWait/2 {
		add(fat.Key("heartbeat"), "%s must be positive and at most half of ackWait %s (%s): the server redelivers "+
			"a message whose timer reaches ackWait, and a heartbeat must land with room to spare for a busy process",
			f.Heartbeat, f.AckWait, f.AckWait/2)
	}
	if f.MaxDeliver < 1 {
		add(fat.Key("maxDeliver"), "%d must be at least 1", f.MaxDeliver)
	}
	if len(f.Backoff) > f.MaxDeliver {
		add(fat.Key("backoff"), "%d entries but maxDeliver is %d", len(f.Backoff), f.MaxDeliver)
	}
	for _, d := range f.Backoff {
		if d <= 0 {
			add(fat.Key("backoff"), "entry %s must be positive", d)
		}
	}
	if f.MaxRetryAfter < 0 {
		add(fat.Key("maxRetryAfter"), "must not be negative (absent: the longer of ackWait and the largest backoff entry)")
	}
	if f.Concurrency < 1 {
		add(fat.Key("concurrency"), "%d must be at least 1", f.Concurrency)
	}
	if f.MaxPayload < 1 {
		add(fat.Key("maxPayload"), "%d must be at least 1 byte", f.MaxPayload)
	}
	if f.Prefetch != nil && *f.Prefetch < 0 {
		add(fat.Key("prefetch"), "%d must not be negative", *f.Prefetch)
	}
	if f.PriorityHeader != "" && !headerName.MatchString(f.PriorityHeader) {
		add(fat.Key("priorityHeader"), "%q is not a header name: letters, digits and !#$%%&'*+-.^_`|~ only, no spaces or colons",
			f.PriorityHeader)
	}
	if r := f.RateLimit; r != nil && !r.valid() {
		add(fat.Key("rateLimit"), "%s: %s", r, rateBounds)
	}
	if f.MaxAckPending < f.Concurrency {
		add(fat.Key("maxAckPending"), "%d is below concurrency %d", f.MaxAckPending, f.Concurrency)
	}
	if f.Timeout <= 0 {
		add(fat.Key("timeout"), "must be positive (default %s)", DefaultTimeout)
	}
	if f.MaxOutage < 0 {
		add(fat.Key("maxOutage"), "must not be negative")
	}
	if _, isTime := f.StartTime(); !isTime && f.Start != StartAll && f.Start != StartNew {
		add(fat.Key("start"), "%q is not all, new or an RFC 3339 time such as 2026-12-01T00:00:00Z", f.Start)
	}
	m.validateRenamedFrom(fat, f, add)
	m.validateKey(fat, f, add)
	m.validateDebounce(fat, f, add)
	m.validateOutputs(fat, f, add)
	m.validateRemote(fat, f, add)
}

// validateRenamedFrom refuses a previous name that is the function's own or
// another function's in this manifest: each would resume from a position
// that is not this function's past.
func (m *Manifest) validateRenamedFrom(fat place, f *FunctionSpec, add problemFunc) {
	if f.RenamedFrom == "" {
		return
	}
	if f.RenamedFrom == f.Name {
		add(fat.Key("renamedFrom"), "is the function's own name")
		return
	}
	if _, ok := m.Function(f.RenamedFrom); ok {
		add(fat.Key("renamedFrom"), "%q is a function of this manifest; a rename leaves only the new name", f.RenamedFrom)
	}
}

// validateOutputs checks that every output is stored by its stream and
// that no output feeds the function's own input, which would loop.
func (m *Manifest) validateOutputs(fat place, f *FunctionSpec, add problemFunc) {
	for i, o := range f.Outputs {
		oat := fat.Key("outputs").Index(i, "")
		if err := checkSubject(o.Subject); err != nil {
			add(oat.Key("subject"), "%v", err)
			continue
		}
		stream, ok := m.Stream(o.Stream)
		switch {
		case !ok:
			add(oat.Key("stream"), "%q is not declared under streams", o.Stream)
		case !CoveredByAny(o.Subject, stream.Subjects):
			add(oat, "subject %s is not stored by stream %s (subjects %v); the publish would fail", o.Subject, o.Stream, stream.Subjects)
		case o.Delayed && !CoveredByAny(DelaySubjects(o.Subject), stream.Subjects):
			add(oat.Key("delayed"), "stream %s must also store %s, where a delayed output waits: add %s.> (or a wider pattern) to its subjects",
				o.Stream, DelaySubjects(o.Subject), o.Subject)
		case stream.Retention == "interest" || stream.Retention == "workqueue":
			add(oat, "stream %s has retention %s, which deletes a message once consumed; the server keeps its "+
				"message ID only while it is stored, so after a restart a redelivery's repeated output would be "+
				"stored again inside the duplicate window. Output streams need retention limits", o.Stream, stream.Retention)
		}
		for _, in := range f.FilterSubjects() {
			if SubjectsOverlap(o.Subject, in) {
				add(oat, "subject %s overlaps the function's own input %s; its output would feed itself", o.Subject, in)
			}
		}
	}
}

func (m *Manifest) validateSubjects(fat place, f *FunctionSpec, add problemFunc) {
	stream, ok := m.Stream(f.Stream)
	if !ok {
		add(fat.Key("stream"), "%q is not declared under streams", f.Stream)
	}
	subjects := f.FilterSubjects()
	switch {
	case len(subjects) == 0:
		add(fat.Key("subject"), "a subject (or subjects) is required")
	case f.Subject != "" && len(f.Subjects) > 0:
		add(fat.Key("subjects"), "give subject or subjects, not both")
	}
	subjAt := fat.Key("subject")
	if f.Subject == "" {
		subjAt = fat.Key("subjects").Labelled(fat.Key("subject").Label)
	}
	for _, subj := range subjects {
		if err := checkSubject(subj); err != nil {
			add(subjAt, "%v", err)
		} else if ok && !CoveredByAny(subj, stream.Subjects) {
			add(subjAt, "%s is not covered by stream %s's subjects %v", subj, stream.Name, stream.Subjects)
		}
	}
}

// validateInputRetention refuses an input stream that deletes messages once
// consumed. With interest retention a message no consumer wants is gone at
// once, though its publisher got a PubAck: everything published while the
// function's consumer is deleted, pruned or not created yet is lost. With
// workqueue retention the stream allows one consumer per subject, so two
// functions, a backfill after a filter change or a replay of a deleted
// consumer's position cannot share it. Limits retention keeps messages for
// the consumer to come back to.
func (m *Manifest) validateInputRetention(f *FunctionSpec, add problemFunc) {
	s, ok := m.Stream(f.Stream)
	if !ok || s.Retention != "interest" && s.Retention != "workqueue" {
		return
	}
	add(m.streamAt(s.Name).Key("retention"), "%s: function %s reads it, and a stream that deletes a message once "+
		"consumed loses what is published while the function's consumer is deleted, pruned or not yet created "+
		"(the publisher still gets a PubAck); input streams need retention limits (bound them with maxAge, maxMsgs "+
		"or maxBytes)", s.Retention, f.Name)
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
