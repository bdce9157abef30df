package manifest

import (
	"strings"
	"testing"
	"time"
)

func TestRateText(t *testing.T) {
	good := []struct {
		text string
		want Rate
		back string
	}{
		{"100/s", Rate{100, time.Second}, "100/s"},
		{"5/m", Rate{5, time.Minute}, "5/m"},
		{"1/h", Rate{1, time.Hour}, "1/h"},
		{"10/250ms", Rate{10, 250 * time.Millisecond}, "10/250ms"},
		{" 3 / 2s ", Rate{3, 2 * time.Second}, "3/2s"},
	}
	for _, tt := range good {
		var r Rate
		if err := r.UnmarshalText([]byte(tt.text)); err != nil || r != tt.want || r.String() != tt.back {
			t.Errorf("%q: %+v, %v, reads back %q; want %+v reading back %q", tt.text, r, err, r.String(), tt.want, tt.back)
		}
	}
	bad := map[string]string{
		"100":     "want messages per time",
		"many/s":  `"many" is not a whole number`,
		"10/week": `"1week" is not a time`,
	}
	for text, want := range bad {
		var r Rate
		if err := r.UnmarshalText([]byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", text, err, want)
		}
	}
}

// TestRateLimitParseError: a rate the manifest cannot read is refused at
// its line, with the form it wants.
func TestRateLimitParseError(t *testing.T) {
	_, err := Parse([]byte(strings.Replace(validManifest, "    concurrency: 4", "    concurrency: 4\n    rateLimit: fast", 1)))
	want := "line 17: functions[0] (summarize-session).rateLimit: fast: want messages per time, such as 100/s"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
