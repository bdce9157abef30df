package publishrecordingevent

import (
	"errors"
	"testing"

	"github.com/jetfn/jetfn"
)

// TestCheckConfigRefusesAnyKey: the function takes no config, so check,
// deploy and New refuse every key rather than ignore it.
func TestCheckConfigRefusesAnyKey(t *testing.T) {
	tests := []struct {
		name  string
		block string
		want  string
	}{
		{name: "no block", block: "", want: ""},
		{name: "an empty block", block: "{}", want: ""},
		{name: "any key", block: "retries: 3", want: "line 1: retries: unknown key; this block takes no keys"},
		{name: "every key", block: "a: 1\nb: 2", want: "line 1: a: unknown key; this block takes no keys\n" +
			"line 2: b: unknown key; this block takes no keys"},
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
				t.Errorf("New error = %v, want %q (or jetfn.ErrNoMongo for an empty block)", err, tt.want)
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
