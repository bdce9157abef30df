package yamldecode

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"quiet", "maxRounds", "id", "maxDeliver"}
	tests := []struct {
		name string
		key  string
		want string
	}{
		{name: "doubled letter", key: "quiett", want: "quiet"},
		{name: "swapped letters", key: "qiuet", want: "quiet"},
		{name: "case only", key: "MAXROUNDS", want: "maxRounds"},
		{name: "case and a typo", key: "maxround", want: "maxRounds"},
		{name: "too far", key: "quietPeriod", want: ""},
		{name: "a short key is not corrected into another", key: "x", want: ""},
		{name: "a two-letter key one edit away", key: "ix", want: "id"},
		{name: "snake case", key: "max_deliver", want: "maxDeliver"},
		{name: "kebab case", key: "max-rounds", want: "maxRounds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Closest(tt.key, known); got != tt.want {
				t.Errorf("Closest(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}
