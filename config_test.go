package jetfn

import (
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// decodeTarget is a function's config type with the shapes Decode checks:
// plain keys, a nested struct, a pointer to one, a map, an untagged field
// and an inline struct.
type decodeTarget struct {
	Quiet     time.Duration `yaml:"quiet"`
	MaxRounds int           `yaml:"maxRounds"`
	Retry     struct {
		Max int `yaml:"max"`
	} `yaml:"retry"`
	Limits *decodeLimits     `yaml:"limits"`
	Labels map[string]string `yaml:"labels"`
	Name   string
	Hidden int          `yaml:"-"`
	Window decodeWindow `yaml:",inline"`
}

type decodeWindow struct {
	Every time.Duration `yaml:"every"`
}

type decodeLimits struct {
	Burst int `yaml:"burst"`
}

func defaultTarget() decodeTarget {
	return decodeTarget{Quiet: 2 * time.Second, MaxRounds: 5}
}

func TestConfigDecode(t *testing.T) {
	withRetry := defaultTarget()
	withRetry.Retry.Max = 3
	tests := []struct {
		name    string
		block   string
		want    decodeTarget
		wantErr string
	}{
		{name: "absent keys keep the defaults", block: "maxRounds: 9",
			want: decodeTarget{Quiet: 2 * time.Second, MaxRounds: 9}},
		{name: "nested, pointer, map and untagged fields", block: "retry:\n  max: 3\nlimits:\n  burst: 2\nlabels: {team: x}\nname: n\nevery: 1s",
			want: decodeTarget{Quiet: 2 * time.Second, MaxRounds: 5, Retry: withRetry.Retry,
				Limits: &decodeLimits{Burst: 2}, Labels: map[string]string{"team": "x"}, Name: "n", Window: decodeWindow{Every: time.Second}}},
		{name: "a typo is named with its line and the key meant", block: "maxRounds: 9\nquiett: 1s",
			wantErr: "line 2: quiett: unknown key; did you mean quiet?"},
		{name: "a key in the wrong case gets the right one", block: "maxrounds: 3",
			wantErr: "line 1: maxrounds: unknown key; did you mean maxRounds?"},
		{name: "a key nothing is close to lists the keys", block: "speed: 3",
			wantErr: "line 1: speed: unknown key; the keys here are every, labels, limits, maxRounds, name, quiet, retry"},
		{name: "a yaml:\"-\" field takes no key", block: "hidden: 1",
			wantErr: "line 1: hidden: unknown key; the keys here are every, labels, limits, maxRounds, name, quiet, retry"},
		{name: "an inline struct's key in the wrong case", block: "Every: 1s",
			wantErr: "line 1: Every: unknown key; did you mean every?"},
		{name: "a nested typo has its path", block: "retry:\n  mx: 3",
			wantErr: "line 2: retry.mx: unknown key; did you mean max?"},
		{name: "a typo behind a pointer has its path", block: "limits:\n  brust: 3",
			wantErr: "line 2: limits.brust: unknown key; did you mean burst?"},
		{name: "a bad value names its key and line", block: "maxRounds: 1\nquiet: soon",
			wantErr: "line 2: quiet: soon is not a duration such as 500ms, 6s, 2m or 24h"},
		{name: "every problem at once", block: "quiett: 1s\nmaxRounds: many\nretry: {max: x}",
			wantErr: "line 1: quiett: unknown key; did you mean quiet?\n" +
				"line 2: maxRounds: many is not a whole number\n" +
				"line 3: retry.max: x is not a whole number"},
		{name: "a repeated key names both lines", block: "quiet: 1s\nmaxRounds: 2\nquiet: 3s",
			wantErr: "line 3: quiet: also set at line 1"},
		{name: "a block that is not a mapping", block: "[1, 2]",
			wantErr: "line 1: want keys and values (key: value), not a list"},
		// Before the manifest's decoder read config blocks too, this read
		// "cannot unmarshal !!int `5` into time.Duration".
		{name: "a duration without a unit says which", block: "quiet: 5",
			wantErr: "line 1: quiet: 5 has no unit; durations need a unit: 5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			block, err := ConfigFromYAML(tt.block)
			if err != nil {
				t.Fatal(err)
			}
			got := defaultTarget()
			err = block.Decode(&got)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Decode error:\n%v\nwant:\n%s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decode = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestConfigDecodeLeavesTextTypesToYAML: types that read themselves from
// text, interfaces and arrays decode as yaml.v3 decodes them, as they did
// before config blocks shared the manifest's decoder.
func TestConfigDecodeLeavesTextTypesToYAML(t *testing.T) {
	block, err := ConfigFromYAML("at: 2026-12-04T05:00:00Z\naddr: 10.0.0.1\nextra: {a: [1, 2]}\npair: [3, 4]")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		At    time.Time  `yaml:"at"`
		Addr  netip.Addr `yaml:"addr"`
		Extra any        `yaml:"extra"`
		Pair  [2]int     `yaml:"pair"`
	}
	if err := block.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if !got.At.Equal(time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)) || got.Addr.String() != "10.0.0.1" || got.Pair != [2]int{3, 4} ||
		!reflect.DeepEqual(got.Extra, map[string]any{"a": []any{1, 2}}) {
		t.Errorf("Decode = %+v", got)
	}
}

func TestConfigDecodeEmptyBlock(t *testing.T) {
	for _, text := range []string{"", "{}"} {
		block, err := ConfigFromYAML(text)
		if err != nil {
			t.Fatal(err)
		}
		got := defaultTarget()
		if err := block.Decode(&got); err != nil || !reflect.DeepEqual(got, defaultTarget()) {
			t.Errorf("Decode(%q) = %+v, %v; want the defaults", text, got, err)
		}
	}
}
