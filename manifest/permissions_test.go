package manifest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReplyPermissions: replies may go to the requesters' inbox prefixes
// and, with a remote function, to the instance's own (its services answer
// its own $SRV.INFO probe); never to every reply subject.
func TestReplyPermissions(t *testing.T) {
	local := remoteManifest("")
	remote := remoteManifest("    remote: {subject: greeter.handle}\n")
	tests := []struct {
		name     string
		manifest string
		opts     PermissionOptions
		want     []string
	}{
		{name: "the default inbox", manifest: local, want: []string{"_INBOX.>"}},
		{name: "the operators' own prefixes", manifest: local, opts: PermissionOptions{ReplyPrefixes: []string{"_OPS", "_CONSOLE"}},
			want: []string{"_OPS.>", "_CONSOLE.>"}},
		{name: "the instance's own prefix is not a requester's", manifest: local, opts: PermissionOptions{InboxPrefix: "_JETFN"},
			want: []string{"_INBOX.>"}},
		{name: "a remote function adds the instance's own prefix", manifest: remote,
			opts: PermissionOptions{InboxPrefix: "_JETFN", ReplyPrefixes: []string{"_OPS"}}, want: []string{"_OPS.>", "_JETFN.>"}},
		{name: "a remote function with the default prefixes", manifest: remote, want: []string{"_INBOX.>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.manifest))
			if err != nil {
				t.Fatal(err)
			}
			p := m.Permissions(tt.opts)
			got := slices.DeleteFunc(slices.Clone(p.Publish), func(s string) bool { return !strings.HasSuffix(s, ".>") || strings.HasPrefix(s, "$") })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reply rights (-want +got):\n%s", diff)
			}
			if strings.Contains(p.ServerConfig(), "allow_responses") {
				t.Errorf("the block grants allow_responses:\n%s", p.ServerConfig())
			}
		})
	}
}

func TestPermissionOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts PermissionOptions
		want []string // substrings of the error; none for valid options
	}{
		{name: "defaults"},
		{name: "literal prefixes", opts: PermissionOptions{InboxPrefix: "_INBOX_app", ReplyPrefixes: []string{"_OPS", "ops.inbox"}}},
		{name: "every bad prefix at once", opts: PermissionOptions{InboxPrefix: "_IN BOX",
			ReplyPrefixes: []string{"_INBOX.*", "$JS.API", "ops."}},
			want: []string{`inbox prefix "_IN BOX"`, `reply prefix "_INBOX.*": not a usable inbox prefix: holds a wildcard`,
				`reply prefix "$JS.API": not a usable inbox prefix: is in NATS's own $ namespace`, `reply prefix "ops."`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInboxPrefix) {
				t.Fatalf("Validate = %v, want ErrInboxPrefix", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
