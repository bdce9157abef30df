package manifest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/jetfn/jetfn/internal/yamldecode"
	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a manifest and where it is: the file
// (when the manifest came from one), the line, and the key as a person reads
// it. It reads like a compiler's error:
//
//	manifests/local.yaml:31: functions[0] (summarize-session).heartbeat: 4s must be positive and at most half of ackWait 6s (3s): …
//
// A problem whose key the manifest leaves out (a default broke a rule)
// points at the nearest enclosing entry that is there.
type Problem struct {
	File string
	// Line is 1-based; 0 for a manifest built in Go rather than parsed.
	Line int
	// Where is the key, e.g. "functions[0] (summarize-session).ackWait".
	Where string
	Err   error
}

// Error is "file:line: where: problem", leaving out what is unknown.
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(location(p.File, p.Line))
	if p.Where != "" {
		b.WriteString(p.Where + ": ")
	}
	b.WriteString(p.Err.Error())
	return b.String()
}

// location is "file:line: ", "file: " or "line N: ", or empty.
func location(file string, line int) string {
	switch {
	case file != "" && line > 0:
		return fmt.Sprintf("%s:%d: ", file, line)
	case file != "":
		return file + ": "
	case line > 0:
		return fmt.Sprintf("line %d: ", line)
	}
	return ""
}

// Unwrap returns the problem without its place.
func (p *Problem) Unwrap() error { return p.Err }

// place is where in a manifest a problem is: the label a person reads and
// the path (keys and list indexes) that finds its line in the YAML tree.
type place = yamldecode.Place

// at is the top-level key k.
func at(k string) place { return place{}.Key(k) }

// problem is err at p, on the line of p's key in the parsed manifest.
func (m *Manifest) problem(p place, err error) *Problem {
	return m.problemAt(p, m.lineOf(p.Path), err)
}

func (m *Manifest) problemAt(p place, line int, err error) *Problem {
	return &Problem{File: m.file, Line: line, Where: p.Label, Err: err}
}

// lineOf is the line of the key at path, or of the nearest enclosing entry
// the manifest has; 0 without a parsed tree.
func (m *Manifest) lineOf(path []any) int {
	node := m.root
	if node == nil {
		return 0
	}
	line := node.Line
	for _, step := range path {
		switch s := step.(type) {
		case string:
			k, v := yamldecode.Entry(node, s)
			if k == nil {
				return line
			}
			node, line = v, k.Line
		case int:
			if node.Kind != yaml.SequenceNode || s >= len(node.Content) {
				return line
			}
			node = node.Content[s]
			line = node.Line
		}
	}
	return line
}

// sortProblems orders problems by line, keeping the order of those on one
// line, so a report reads from the top of the file down.
func sortProblems(ps []*Problem) {
	slices.SortStableFunc(ps, func(a, b *Problem) int { return cmp.Compare(a.Line, b.Line) })
}

// asProblems keeps the *Problem values of errs (all of them, as the checks
// in this package make them).
func asProblems(errs []error) []*Problem {
	out := make([]*Problem, 0, len(errs))
	for _, err := range errs {
		if p, ok := err.(*Problem); ok {
			out = append(out, p)
		} else {
			out = append(out, &Problem{Err: err})
		}
	}
	return out
}
