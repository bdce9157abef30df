package yamldecode

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// Entry is the key and value nodes of key in a mapping node, nil if node is
// no mapping or lacks the key: what places a problem on its line.
func Entry(node *yaml.Node, key string) (k, v *yaml.Node) {
	if node == nil || node.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == key {
			return node.Content[i], node.Content[i+1]
		}
	}
	return nil, nil
}

// maxHintDistance is how many edits away a known key may be and still be
// offered: two catches a doubled, dropped or swapped letter, and the
// spellings max_deliver or MaxDeliver of maxDeliver count as none or one.
const maxHintDistance = 2

// Closest is the known key fewest edits from key, ignoring case and the
// separators - and _, within maxHintDistance edits and fewer edits than key
// has letters (so a short key is not "corrected" into an unrelated one);
// empty when none is that close.
func Closest(key string, known []string) string {
	best, bestDist := "", maxHintDistance+1
	norm := normalize(key)
	for _, k := range known {
		d := levenshtein(norm, normalize(k))
		if d < bestDist && d < len([]rune(norm)) {
			best, bestDist = k, d
		}
	}
	return best
}

func normalize(k string) string {
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
