package manifest

import (
	"strings"

	"github.com/jetfn/jetfn"
)

// validateRemote checks a remote function's endpoint. The subject must be
// literal, since one request goes to one subject, and nothing but the
// remote may answer it: no stream may store it (JetStream would store each
// request and answer it with a PubAck, which jetfn would read as the
// reply), and it is neither a NATS system subject nor a function's status
// endpoint, which jetfn's own micro service answers. A config block is
// refused because nothing would read it: the remote has its own settings.
func (m *Manifest) validateRemote(fat place, f *FunctionSpec, add problemFunc) {
	if !f.IsRemote() {
		return
	}
	if !f.Config.Equal(jetfn.Config{}) {
		add(fat.Key("config"), "a remote function takes no config block; the remote service keeps its own settings")
	}
	subj := f.Remote.Subject
	sat := fat.Key("remote").Key("subject")
	if subj == "" {
		add(sat, "required: the subject of the NATS micro endpoint that handles each delivery")
		return
	}
	if err := checkSubject(subj); err != nil {
		add(sat, "%v", err)
		return
	}
	if hasWildcard(subj) {
		add(sat, "%s holds a wildcard; a request goes to one literal subject", subj)
	}
	if strings.HasPrefix(subj, "$") || strings.HasPrefix(subj, "_INBOX.") {
		add(sat, "%s is a subject of NATS itself (JetStream, micro, inboxes), not one for a service", subj)
	}
	for _, g := range m.Functions {
		if subj == StatusSubject(g.Name) {
			add(sat, "%s is the status endpoint of function %s: jetfn itself would answer each request", subj, g.Name)
		}
		if subj == RunsSubject(g.Name) {
			add(sat, "%s is the runs endpoint of function %s: jetfn itself would answer each request", subj, g.Name)
		}
	}
	for _, s := range m.Streams {
		for _, ss := range s.Subjects {
			if SubjectsOverlap(subj, ss) {
				add(sat, "%s is stored by stream %s (subjects %v): JetStream would store each request and answer "+
					"it with a PubAck instead of the remote", subj, s.Name, s.Subjects)
			}
		}
	}
}

// IsLiteralSubject reports whether one can publish to subj: no empty
// token, no whitespace, no wildcard. A remote's reply names its outputs'
// subjects, and only a literal one can be published.
func IsLiteralSubject(subj string) bool { return checkSubject(subj) == nil && !hasWildcard(subj) }

// hasWildcard reports whether subj has a * or > token.
func hasWildcard(subj string) bool {
	for _, t := range strings.Split(subj, ".") {
		if t == "*" || t == ">" {
			return true
		}
	}
	return false
}

// RemoteSubjects lists the endpoint subjects of m's remote functions, in
// manifest order.
func (m *Manifest) RemoteSubjects() []string {
	var out []string
	for _, f := range m.Functions {
		if f.IsRemote() {
			out = append(out, f.Remote.Subject)
		}
	}
	return out
}

// FunctionProblem is err about key (dotted, e.g. "remote.subject") of the
// i-th function, placed at its line like every other problem, for checks
// made outside this package (`jetfn check --server` asks the server).
func (m *Manifest) FunctionProblem(i int, key string, err error) *Problem {
	p := at("functions").Index(i, m.Functions[i].Name)
	for _, k := range strings.Split(key, ".") {
		p = p.Key(k)
	}
	return m.problem(p, err)
}

// File is the path the manifest was read from; empty for bytes from
// elsewhere.
func (m *Manifest) File() string { return m.file }
