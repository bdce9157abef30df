package manifest

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// remoteManifest has one compiled-in function and one remote one, whose
// entry starts at line 11; extra lines are added to the remote entry.
func remoteManifest(extra string) string {
	return `streams:
  - name: GREETINGS
    subjects: ["greet.>"]
  - name: DEADLETTER
    subjects: ["deadletter.>"]
functions:
  - name: summarize-session
    version: 1.0.0
    stream: GREETINGS
    subject: greet.other
  - name: remote-greet
    version: 1.0.0
    stream: GREETINGS
    subject: greet.requested
    outputs: [{subject: greet.done, stream: GREETINGS}]
` + extra
}

// TestRemoteFunctionValid: a remote function's name is not looked up in
// the registry, and its entry validates like any other.
func TestRemoteFunctionValid(t *testing.T) {
	m, report := Inspect("app.yaml", []byte(remoteManifest("    remote: {subject: greeter.handle}\n")), nil)
	var got []string
	for _, p := range report.Problems {
		got = append(got, p.Error())
	}
	// summarize-session is unknown to an empty registry; remote-greet is
	// not looked up.
	want := []string{`app.yaml:7: functions[0] (summarize-session).name: unknown function "summarize-session"; this binary has: `}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("problems (-want +got):\n%s", diff)
	}
	f, _ := m.Function("remote-greet")
	if !f.IsRemote() || f.Remote.Subject != "greeter.handle" {
		t.Fatalf("remote = %+v", f.Remote)
	}
	if got := m.RemoteSubjects(); !cmp.Equal(got, []string{"greeter.handle"}) {
		t.Errorf("RemoteSubjects = %v", got)
	}
	perms := m.Permissions(PermissionOptions{})
	for _, want := range []string{"greeter.handle", "$SRV.INFO"} {
		if !slices.Contains(perms.Publish, want) {
			t.Errorf("permissions publish %v lack %s", perms.Publish, want)
		}
	}
}

// TestRemoteFunctionProblems: every problem of a remote block names its
// file, line and key, as any other field's does.
func TestRemoteFunctionProblems(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		want  string
	}{
		{name: "no subject", extra: "    remote: {}\n",
			want: "app.yaml:16: functions[1] (remote-greet).remote.subject: required: the subject of the NATS micro endpoint that handles each delivery"},
		{name: "wildcard", extra: "    remote:\n      subject: greeter.*\n",
			want: "app.yaml:17: functions[1] (remote-greet).remote.subject: greeter.* holds a wildcard; a request goes to one literal subject"},
		{name: "stored by a stream", extra: "    remote:\n      subject: greet.handle\n",
			want: "app.yaml:17: functions[1] (remote-greet).remote.subject: greet.handle is stored by stream GREETINGS (subjects [greet.>]): " +
				"JetStream would store each request and answer it with a PubAck instead of the remote"},
		{name: "a function's status endpoint", extra: "    remote: {subject: summarize-session.status}\n",
			want: "app.yaml:16: functions[1] (remote-greet).remote.subject: summarize-session.status is the status endpoint of function " +
				"summarize-session: jetfn itself would answer each request"},
		{name: "a function's runs endpoint", extra: "    remote: {subject: summarize-session.runs}\n",
			want: "app.yaml:16: functions[1] (remote-greet).remote.subject: summarize-session.runs is the runs endpoint of function " +
				"summarize-session: jetfn itself would answer each request"},
		{name: "a system subject", extra: "    remote: {subject: $SRV.PING}\n",
			want: "app.yaml:16: functions[1] (remote-greet).remote.subject: $SRV.PING is a subject of NATS itself (JetStream, micro, inboxes), not one for a service"},
		{name: "config block", extra: "    remote: {subject: greeter.handle}\n    config: {quiet: 2s}\n",
			want: "app.yaml:17: functions[1] (remote-greet).config: a remote function takes no config block; the remote service keeps its own settings"},
		{name: "unknown key", extra: "    remote: {subject: greeter.handle, subjet: x}\n",
			want: "app.yaml:16: functions[1] (remote-greet).remote.subjet: unknown key; did you mean subject?"},
		{name: "bad subject", extra: "    remote: {subject: 'greeter..handle'}\n",
			want: `app.yaml:16: functions[1] (remote-greet).remote.subject: subject "greeter..handle" has an empty token or whitespace`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, report := Inspect("app.yaml", []byte(remoteManifest(tt.extra)), nil)
			var got []string
			for _, p := range report.Problems {
				if p.Line > 7 { // the unknown summarize-session is not this test's
					got = append(got, p.Error())
				}
			}
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRemoteChangeIsPlanned: a new remote subject is a change of the
// function, which Apply re-binds.
func TestRemoteChangeIsPlanned(t *testing.T) {
	a, err := Parse([]byte(remoteManifest("    remote: {subject: greeter.handle}\n")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(remoteManifest("    remote: {subject: greeter.v2}\n")))
	if err != nil {
		t.Fatal(err)
	}
	p := PlanChange(a, b)
	if len(p.Changed) != 1 || !cmp.Equal(p.Changed[0].Fields, []string{"remote"}) {
		t.Errorf("plan %+v, want remote-greet changed in remote", p)
	}
}
