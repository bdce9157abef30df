package runtime

import (
	"fmt"
	"slices"
	"strings"
)

// Permissions are the NATS subjects a runtime instance needs for a manifest
// and nothing more.
type Permissions struct {
	Publish   []string `json:"publish"`
	Subscribe []string `json:"subscribe"`
	// AllowResponses lets the instance answer requests (micro PING, INFO,
	// STATS and the status endpoint) without publish rights on every inbox.
	AllowResponses bool `json:"allow_responses"`
}

// PermissionOptions shape the generated permissions.
type PermissionOptions struct {
	// InboxPrefix is the connection's inbox prefix (default _INBOX).
	InboxPrefix string
	// Provision adds the stream and consumer management rights that a
	// runtime needs when it creates and updates them itself.
	Provision bool
}

// Permissions lists what an instance running m needs: per function the pull
// (MSG.NEXT), ack and info APIs of its consumer, the stream lookup, its
// outputs and dead-letter subject and its micro subjects.
func (m *Manifest) Permissions(o PermissionOptions) Permissions {
	inbox := o.InboxPrefix
	if inbox == "" {
		inbox = "_INBOX"
	}
	pub, sub := newSubjectSet(), newSubjectSet()
	sub.add(inbox+".>", "$SRV.PING", "$SRV.INFO", "$SRV.STATS")
	for _, f := range m.Functions {
		s, d := f.Stream, f.Durable
		pub.add("$JS.API.CONSUMER.MSG.NEXT."+s+"."+d, "$JS.ACK."+s+"."+d+".>",
			"$JS.API.CONSUMER.INFO."+s+"."+d, "$JS.API.STREAM.INFO."+s,
			m.DeadLetterSubject(f.Name))
		pub.add(f.OutputSubjects()...)
		sub.add("$SRV.*."+f.Name, "$SRV.*."+f.Name+".*", StatusSubject(f.Name))
		if o.Provision {
			pub.add("$JS.API.CONSUMER.CREATE."+s+"."+d, "$JS.API.CONSUMER.CREATE."+s+"."+d+".>")
		}
	}
	if o.Provision {
		for _, s := range m.Streams {
			pub.add("$JS.API.STREAM.CREATE."+s.Name, "$JS.API.STREAM.UPDATE."+s.Name, "$JS.API.STREAM.INFO."+s.Name)
		}
	}
	return Permissions{Publish: pub.list(), Subscribe: sub.list(), AllowResponses: true}
}

// ServerConfig renders the permissions as a nats-server `permissions`
// block, ready to paste under a user.
func (p Permissions) ServerConfig() string {
	var b strings.Builder
	b.WriteString("permissions: {\n")
	fmt.Fprintf(&b, "  publish: { allow: %s }\n", quoteList(p.Publish))
	fmt.Fprintf(&b, "  subscribe: { allow: %s }\n", quoteList(p.Subscribe))
	if p.AllowResponses {
		b.WriteString("  allow_responses: true\n")
	}
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
