package console

import "strings"

// diffLine is one line of a line diff: kept (' '), removed ('-') or added
// ('+'), with its numbers in the old and new text (0 where it has none).
type diffLine struct {
	Op           byte
	Text         string
	OldNo, NewNo int
}

// maxDiffLines keeps the quadratic table small; manifests are far shorter.
const maxDiffLines = 4000

// lineDiff is the shortest line diff of a to b (a longest common
// subsequence), in order. Texts past maxDiffLines are shown as all removed
// and all added.
func lineDiff(a, b string) []diffLine {
	x, y := splitLines(a), splitLines(b)
	if len(x) > maxDiffLines || len(y) > maxDiffLines {
		return append(mark('-', x, true), mark('+', y, false)...)
	}
	// lcs[i][j] is the LCS length of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out = append(out, diffLine{Op: ' ', Text: x[i], OldNo: i + 1, NewNo: j + 1})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, diffLine{Op: '-', Text: x[i], OldNo: i + 1})
			i++
		default:
			out = append(out, diffLine{Op: '+', Text: y[j], NewNo: j + 1})
			j++
		}
	}
	return out
}

func mark(op byte, lines []string, old bool) []diffLine {
	out := make([]diffLine, len(lines))
	for i, l := range lines {
		out[i] = diffLine{Op: op, Text: l}
		if old {
			out[i].OldNo = i + 1
		} else {
			out[i].NewNo = i + 1
		}
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// diffStats counts the added and removed lines.
func diffStats(lines []diffLine) (added, removed int) {
	for _, l := range lines {
		switch l.Op {
		case '+':
			added++
		case '-':
			removed++
		}
	}
	return added, removed
}
