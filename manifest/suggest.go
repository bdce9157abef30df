package manifest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// unknownKey says that no field takes key, naming the key the author most
// likely meant, or else the keys there are.
func unknownKey(key string, keys map[string]reflect.StructField) error {
	known := make([]string, 0, len(keys))
	for k := range keys {
		known = append(known, k)
	}
	slices.Sort(known)
	if best := closestKey(key, known); best != "" {
		return fmt.Errorf("unknown key; did you mean %s?", best)
	}
	return fmt.Errorf("unknown key; the keys here are %s", strings.Join(known, ", "))
}

// maxHintDistance is how many edits away a known key may be and still be
// offered: two catches a doubled, dropped or swapped letter, and the
// spellings max_deliver or MaxDeliver of maxDeliver count as none or one.
const maxHintDistance = 2

// closestKey is the known key fewest edits from key, ignoring case and the
// separators - and _, within maxHintDistance edits and fewer edits than key
// has letters; empty when none is that close.
func closestKey(key string, known []string) string {
	best, bestDist := "", maxHintDistance+1
	norm := normalizeKey(key)
	for _, k := range known {
		d := levenshtein(norm, normalizeKey(k))
		if d < bestDist && d < len([]rune(norm)) {
			best, bestDist = k, d
		}
	}
	return best
}

func normalizeKey(k string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(k))
}

// levenshtein counts the single-rune insertions, deletions and
// substitutions that turn a into b.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := range ra {
		cur := make([]int, len(rb)+1)
		cur[0] = i + 1
		for j := range rb {
			cost := 1
			if ra[i] == rb[j] {
				cost = 0
			}
			cur[j+1] = min(prev[j+1]+1, cur[j]+1, prev[j]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}
