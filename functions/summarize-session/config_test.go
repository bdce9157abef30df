package summarizesession

import (
	"errors"
	"testing"

	"github.com/jetfn/jetfn"
)

// TestCheckConfigMatchesNew checks the block as check and deploy do, and
// that New, which needs no Mongo to reach its config, refuses the same.
func TestCheckConfigMatchesNew(t *testing.T) {
	tests := []struct {
		name  string
		block string
		want  string
	}{
		{name: "no block", block: "", want: ""},
		{name: "the local manifest's block", block: "quiet: 2s\nmaxRounds: 5", want: ""},
		{name: "a typo", block: "maxRounds: 5\nquiett: 2s", want: "line 2: quiett: unknown key; did you mean quiet?"},
		{name: "a negative quiet", block: "quiet: -5s", want: "line 1: quiet: -5s is negative"},
		{name: "a bad duration", block: "quiet: soon", want: "line 1: quiet: soon is not a duration such as 500ms, 6s, 2m or 24h"},
		{name: "zero rounds", block: "quiet: 1s\nmaxRounds: 0", want: "line 2: maxRounds: 0 is below 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			block, err := jetfn.ConfigFromYAML(tt.block)
			if err != nil {
				t.Fatal(err)
			}
			if got := errText(CheckConfig(block)); got != tt.want {
				t.Errorf("CheckConfig error:\n%s\nwant:\n%s", got, tt.want)
			}
			_, err = New(jetfn.Deps{Config: block})
			if tt.want == "" && !errors.Is(err, jetfn.ErrNoMongo) || tt.want != "" && errText(err) != tt.want {
				t.Errorf("New error = %v, want %q (or jetfn.ErrNoMongo for a valid block)", err, tt.want)
			}
		})
	}
}

// errText is err's message, empty for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
