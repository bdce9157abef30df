package natsconn

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name string
		s    Settings
		want []string // substrings of the error; none for valid settings
	}{
		{name: "nothing set"},
		{name: "user and password", s: Settings{User: "u", Password: "p"}},
		{name: "every problem at once", s: Settings{User: "u", Token: "t", CertFile: missing},
			want: []string{"set at most one", "NATS_USER and NATS_PASSWORD: set both or neither",
				"NATS_CERT and NATS_KEY: set both or neither", "NATS_CERT: stat " + missing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %v, want it to name %q", err, w)
				}
			}
		})
	}
}
