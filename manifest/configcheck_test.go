package manifest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetfn/jetfn"
)

// errText is err's message, empty for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ruledTarget has rules beyond its shape, reported as InvalidConfig.
type ruledTarget struct {
	MaxRounds int `yaml:"maxRounds"`
	Retry     struct {
		Max int `yaml:"max"`
	} `yaml:"retry"`
}

func (c ruledTarget) Validate() error {
	var errs []error
	if c.MaxRounds < 1 {
		errs = append(errs, jetfn.InvalidConfig("maxRounds", "%d is below 1", c.MaxRounds))
	}
	if c.Retry.Max < 0 {
		errs = append(errs, jetfn.InvalidConfig("retry.max", "%d is negative", c.Retry.Max))
	}
	if c.MaxRounds > 100 {
		errs = append(errs, errors.New("too many rounds"))
	}
	return errors.Join(errs...)
}

func TestConfigDecodeValid(t *testing.T) {
	tests := []struct {
		name  string
		block string
		want  string
	}{
		{name: "valid", block: "maxRounds: 3", want: ""},
		{name: "a rule names the key's line", block: "retry:\n  max: 1\nmaxRounds: 0", want: "line 3: maxRounds: 0 is below 1"},
		{name: "a nested rule names the nested key's line", block: "maxRounds: 2\nretry:\n  max: -1", want: "line 3: retry.max: -1 is negative"},
		{name: "every rule at once", block: "maxRounds: -2\nretry: {max: -1}",
			want: "line 1: maxRounds: -2 is below 1\nline 2: retry.max: -1 is negative"},
		{name: "a default that breaks a rule has no line", block: "retry: {max: 1}", want: "maxRounds: 0 is below 1"},
		{name: "an error without a key is kept as it is", block: "maxRounds: 101", want: "too many rounds"},
		{name: "decoding problems come before the rules run", block: "maxRounds: 0\nretyr: {}",
			want: "line 2: retyr: unknown key; did you mean retry?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			block, err := jetfn.ConfigFromYAML(tt.block)
			if err != nil {
				t.Fatal(err)
			}
			var got ruledTarget
			if err := block.DecodeValid(&got); errText(err) != tt.want {
				t.Fatalf("DecodeValid error:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}

// checkedFunction is a function whose check decodes into ruledTarget.
func checkedFunction(name string) jetfn.Function {
	return jetfn.Function{Name: name, CheckConfig: func(c jetfn.Config) error {
		var cfg ruledTarget
		return c.DecodeValid(&cfg)
	}}
}

func TestCheckConfigs(t *testing.T) {
	text := strings.Replace(validManifest, "      quiet: 2s", "      maxRounds: many\n      quiett: 1s", 1) + `
  - name: publish-recording-event
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.recording
    config:
      retry: {max: -1}
      maxRounds: 2
  - name: unchecked
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.other
    config:
      anything: 1
  - name: unknown-function
    version: 1.0.0
    stream: TRANSCRIPTION
    subject: transcription.unknown
    config:
      anything: 1
`
	m, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	fns := []jetfn.Function{checkedFunction("summarize-session"), checkedFunction("publish-recording-event"), {Name: "unchecked"}}
	err = CheckConfigs(m, fns)
	want := "invalid manifest: function config:\n" +
		"functions[0] (summarize-session).config: line 18: maxRounds: many is not a whole number\n" +
		"functions[0] (summarize-session).config: line 19: quiett: unknown key; the keys here are maxRounds, retry\n" +
		"functions[1] (publish-recording-event).config: line 26: retry.max: -1 is negative"
	if errText(err) != want {
		t.Fatalf("CheckConfigs error:\n%v\nwant:\n%s", err, want)
	}
	for _, sentinel := range []error{ErrInvalidConfig, ErrInvalidManifest, jetfn.ErrUnknownConfigKey} {
		if !errors.Is(err, sentinel) {
			t.Errorf("CheckConfigs error is not %v", sentinel)
		}
	}
}

func TestCheckConfigsPasses(t *testing.T) {
	m, err := Parse([]byte(strings.Replace(validManifest, "      quiet: 2s", "      maxRounds: 2", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConfigs(m, []jetfn.Function{checkedFunction("summarize-session")}); err != nil {
		t.Fatalf("CheckConfigs = %v, want nil", err)
	}
}

// TestConfigDecodeKeepsManifestLines decodes a block as the runtime gets it,
// from a parsed manifest: the line is the manifest file's, not the block's.
func TestConfigDecodeKeepsManifestLines(t *testing.T) {
	m, err := Parse([]byte(strings.Replace(validManifest, "      quiet: 2s", "      quiet: 2s\n      maxRounds: -1\n      quiett: 1s", 1)))
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		Quiet     time.Duration `yaml:"quiet"`
		MaxRounds int           `yaml:"maxRounds"`
	}{}
	err = m.Functions[0].Config.Decode(&got)
	if want := "line 20: quiett: unknown key; did you mean quiet?"; err == nil || err.Error() != want {
		t.Fatalf("Decode error = %v, want %q", err, want)
	}
}
